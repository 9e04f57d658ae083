from __future__ import annotations

import os
from datetime import UTC, datetime

import msgpack
import pytest

from hookbay_common.models import AttemptTrigger, DeliveryTask, RejectedReason
from hookbay_common.wire import (
    WireError,
    decode_attempt,
    decode_event,
    decode_task,
    encode_attempt,
    encode_event,
    encode_task,
)
from tests.support.factories import create_attempt, create_event

BODIES = {
    "json": b'{"id": 1, "name": "caf\xc3\xa9"}',
    "xml": b"<?xml version='1.0'?><order id='1'/>",
    "form": b"a=1&b=%20x&c=",
    "text": b"plain text\r\nwith lines\n",
    "binary": bytes(range(256)) * 4,
    "invalid-utf8": b"\xff\xfe\x00abc\xc3",
    "empty": b"",
}


class TestEventWire:
    @pytest.mark.parametrize("kind", sorted(BODIES))
    def test_round_trip_is_exact(self, kind: str) -> None:
        event = create_event(
            body=BODIES[kind],
            request_headers={"x.dotted": "1", "$dollar": "2", "x-multi": "a, b"},
            signature_valid=False,
            rejected_reason=RejectedReason.INVALID_SIGNATURE,
            created_at=datetime(2026, 11, 21, 1, 2, 3, 456000, tzinfo=UTC),
        )
        assert decode_event(encode_event(event)) == event

    def test_large_body_has_no_base64_overhead(self) -> None:
        body = os.urandom(4_500_000)
        encoded = encode_event(create_event(body=body))
        assert len(encoded) < len(body) + 1024
        assert decode_event(encoded).body == body

    @pytest.mark.parametrize(
        "value",
        [
            b"",
            b"\x00\x01",
            b"not msgpack \xc1",
            msgpack.packb({"schema": "attempt/1"}),
            msgpack.packb([1, 2]),
        ],
    )
    def test_garbage_is_a_wire_error(self, value: bytes) -> None:
        with pytest.raises(WireError):
            decode_event(value)

    def test_missing_field_is_a_wire_error(self) -> None:
        with pytest.raises(WireError, match="invalid event/1"):
            decode_event(msgpack.packb({"schema": "event/1", "id": "evt_x"}))


class TestAttemptWire:
    def test_round_trip(self) -> None:
        attempt = create_attempt(
            create_event(),
            trigger=AttemptTrigger.RETRY,
            number=2,
            response_body=b"\xff binary",
            will_retry=True,
            next_retry_at=datetime(2026, 11, 21, 1, 2, 4, tzinfo=UTC),
            started_at=datetime(2026, 11, 21, 1, 2, 3, 1000, tzinfo=UTC),
        )
        assert decode_attempt(encode_attempt(attempt)) == attempt

    def test_event_is_not_an_attempt(self) -> None:
        with pytest.raises(WireError, match="not a attempt/1 message"):
            decode_attempt(encode_event(create_event()))


class TestTaskWire:
    @pytest.mark.parametrize("kind", list(BODIES))
    def test_round_trip_keeps_the_event_exact(self, kind: str) -> None:
        event = create_event(body=BODIES[kind], request_headers={"x.a": "1", "$b": "2"})
        task = DeliveryTask(
            event=event, chain_id="chn_01jd3k0000000000000000000a", trigger=AttemptTrigger.RETRY,
            number=3, url="http://127.0.0.1:9/h", not_before=datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        )  # fmt: skip
        assert decode_task(encode_task(task)) == task

    def test_an_event_is_not_a_task(self) -> None:
        with pytest.raises(WireError, match="task/1"):
            decode_task(encode_event(create_event()))

    def test_task_missing_fields_is_a_wire_error(self) -> None:
        packed = msgpack.packb({"schema": "task/1", "number": 1}, use_bin_type=True)
        with pytest.raises(WireError, match="invalid task/1"):
            decode_task(packed)

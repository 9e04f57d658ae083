from __future__ import annotations

import os
from datetime import UTC, datetime

import msgpack
import pytest

from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import (
    AttemptTrigger,
    DeliveryStatus,
    DeliveryTask,
    RejectedReason,
    TransformTrace,
)
from hookbay_common.routing.tasks import delivery_id, event_of
from hookbay_common.topics import MAX_MESSAGE_BYTES
from hookbay_common.wire import (
    WireError,
    decode_attempt,
    decode_attempts_record,
    decode_delivery,
    decode_destination_task,
    decode_event,
    decode_task,
    encode_attempt,
    encode_delivery,
    encode_destination_task,
    encode_event,
    encode_task,
    is_delivery_record,
    is_destination_task,
    max_event_bytes,
    peek_destination_task,
)
from tests.support.factories import (
    create_attempt,
    create_delivery,
    create_destination_task,
    create_event,
)

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

    def test_routed_and_query_travel_and_are_left_out_at_their_defaults(self) -> None:
        routed = create_event(routed=True, query="src=a&b=%20")
        assert decode_event(encode_event(routed)) == routed
        plain = msgpack.unpackb(encode_event(create_event()), raw=False)
        assert "routed" not in plain
        assert "query" not in plain  # earlier recorders and stats processors read it unchanged

    def test_a_destination_task_is_told_from_other_records(self) -> None:
        task = encode_destination_task(create_destination_task())
        assert is_destination_task(task)
        assert not is_destination_task(encode_event(create_event()))
        assert not is_destination_task(encode_delivery(create_delivery(create_event())))

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

    def test_a_forward_url_attempt_keeps_its_old_shape(self) -> None:
        """Without a delivery, the routing fields are left out: recorders and stats processors
        of earlier versions (whose model forbids unknown fields) read it as before."""
        fields = msgpack.unpackb(encode_attempt(create_attempt(create_event())))
        assert not {"delivery_id", "route", "destination"} & fields.keys()

    def test_an_old_attempt_decodes_without_routing_fields(self) -> None:
        attempt = create_attempt(create_event(), started_at=datetime(2026, 1, 2, tzinfo=UTC))
        fields = attempt.model_dump(mode="python", exclude={"delivery_id", "route", "destination"})
        fields["started_at"] = 1767312000000
        old = msgpack.packb({"schema": "attempt/1", **fields}, use_bin_type=True)
        decoded = decode_attempt(old)
        assert decoded == attempt
        assert (decoded.delivery_id, decoded.route, decoded.destination) == (None, None, None)

    def test_round_trip_of_a_routed_attempt(self) -> None:
        event = create_event()
        attempt = create_attempt(
            event, delivery_id=delivery_id(event.id, "rte_1", event.id), route="billing",
            destination="billing-api", started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        )  # fmt: skip
        assert decode_attempt(encode_attempt(attempt)) == attempt
        assert decode_attempts_record(encode_attempt(attempt)) == attempt


class TestDeliveryWire:
    @pytest.mark.parametrize("chain", [None, "chn_01jd3kxq8s9y0000000000000a"])
    @pytest.mark.parametrize("status", list(DeliveryStatus))
    def test_round_trip(self, status: DeliveryStatus, chain: str | None) -> None:
        delivery = create_delivery(
            create_event(), status=status, reason="paused" if status == "held" else None,
            at=datetime(2026, 11, 21, 1, 2, 3, 4000, tzinfo=UTC), chain=chain,
        )  # fmt: skip
        encoded = encode_delivery(delivery)
        assert decode_delivery(encoded) == delivery
        assert decode_attempts_record(encoded) == delivery
        assert is_delivery_record(encoded)

    def test_a_transformations_trace_round_trips(self) -> None:
        trace = TransformTrace(name="shape", version=3, body_sha256="ab" * 32, logs=("a", "b"))
        delivery = create_delivery(
            create_event(), status=DeliveryStatus.TRANSFORM_FAILED, reason="runtime: Error: x",
            at=datetime(2026, 11, 21, 1, 2, 3, tzinfo=UTC), transform=trace,
        )  # fmt: skip
        encoded = encode_delivery(delivery)
        assert decode_delivery(encoded) == delivery
        assert is_delivery_record(encoded)
        event = create_event()
        attempt = create_attempt(
            event, delivery_id=delivery_id(event.id, "rte_1", event.id), route="billing",
            destination="billing-api", started_at=datetime(2026, 1, 2, tzinfo=UTC),
            transform=trace,
        )  # fmt: skip
        assert decode_attempt(encode_attempt(attempt)) == attempt
        assert (attempt.as_delivery() or delivery).transform == trace
        assert "transform" not in msgpack.unpackb(encode_delivery(create_delivery(event)))

    def test_compact_and_reason_left_out_when_none(self) -> None:
        encoded = encode_delivery(create_delivery(create_event()))
        fields = msgpack.unpackb(encoded)
        assert "reason" not in fields
        assert "chain_id" not in fields
        assert fields["schema"] == "delivery/1"
        assert len(encoded) < 300

    def test_an_attempt_is_not_a_delivery_record(self) -> None:
        attempt = encode_attempt(create_attempt(create_event()))
        assert not is_delivery_record(attempt)
        assert not is_delivery_record(encode_event(create_event()))
        with pytest.raises(WireError, match="not a delivery/1 message"):
            decode_delivery(attempt)

    @pytest.mark.parametrize(
        "change",
        [{"status": "lost"}, {"delivery_id": ""}, {"at": "yesterday"}, {"route": None}],
    )
    def test_invalid_fields_are_refused(self, change: dict[str, object]) -> None:
        fields = msgpack.unpackb(encode_delivery(create_delivery(create_event())))
        with pytest.raises(WireError, match="invalid delivery/1 message"):
            decode_delivery(msgpack.packb({**fields, **change}))

    def test_other_schemas_on_the_attempts_topic_are_refused(self) -> None:
        with pytest.raises(WireError, match="not a attempt/1 or delivery/1 message"):
            decode_attempts_record(encode_event(create_event()))
        with pytest.raises(WireError, match="not a msgpack message"):
            decode_attempts_record(b"\xc1")


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


class TestMaxEventBytes:
    """``max_event_bytes`` bounds the real encodings of the worst requests under the limits."""

    @pytest.mark.parametrize(
        ("body_bytes", "header_bytes", "header_count"),
        [(4_500_000, 65_536, 100), (6_000_000, 65_536, 100), (1_000, 262_144, 1000)],
    )
    def test_bounds_the_worst_event_task_and_dead_letter(
        self, body_bytes: int, header_bytes: int, header_count: int
    ) -> None:
        # every header byte non-ASCII (two bytes in UTF-8), most of them in Content-Type, the
        # rest in repeated fields (joined with ", "), and the longest destination URL
        names = ["content-type"] + ["x-dup"] * (header_count - 1)
        filler = header_bytes - sum(map(len, names)) - (header_count - 1)
        raw = [(b"content-type", b"\xff" * filler)] + [(b"x-dup", b"\xe9")] * (header_count - 1)
        headers: dict[str, str] = {}
        for name, value in raw:
            text = value.decode("latin-1")
            key = name.decode()
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        url = "https://example.com/" + "p" * (2048 - 20)
        event = create_event(
            body=b"\xff" * body_bytes, request_headers=headers,
            content_type=headers["content-type"], forward_url=url,
        )  # fmt: skip
        task = DeliveryTask(
            event=event, chain_id="chn_" + "0" * 26, trigger=AttemptTrigger.RETRY, number=99,
            url=url, not_before=datetime.now(tz=UTC),
        )  # fmt: skip
        bound = max_event_bytes(
            body_bytes=body_bytes, header_bytes=header_bytes, header_count=header_count
        )
        assert len(encode_event(event)) <= bound - 4096
        assert len(encode_task(task)) <= bound - 4096  # room left for key and record framing


class TestDestinationTask:
    def test_round_trips_byte_exact(self) -> None:
        event = create_event(body=BODIES["invalid-utf8"])
        task = create_destination_task(event=event, attempt=3, trigger=AttemptTrigger.RETRY)
        decoded = decode_destination_task(encode_destination_task(task))
        assert decoded == task
        assert decoded.event.body == BODIES["invalid-utf8"]

    def test_routing_fields_are_readable_without_the_event(self) -> None:
        task = create_destination_task(destination="dst_9")
        fields = peek_destination_task(encode_destination_task(task))
        assert (fields["destination"], fields["event_id"], fields["owner"]) == (
            "dst_9", task.event.id, task.event.username,
        )  # fmt: skip

    def test_a_record_of_another_schema_is_refused(self) -> None:
        with pytest.raises(WireError, match="destination-task/1"):
            decode_destination_task(encode_event(create_event()))

    def test_an_owner_that_is_not_the_events_is_refused(self) -> None:
        fields = peek_destination_task(encode_destination_task(create_destination_task()))
        fields["owner"] = "mallory"
        value = msgpack.packb({"schema": "destination-task/1", **fields}, use_bin_type=True)
        with pytest.raises(WireError, match="owner"):
            decode_destination_task(value)

    def test_fits_a_kafka_record_with_the_largest_body(self) -> None:
        body = os.urandom(4_500_000)
        task = create_destination_task(event=create_event(body=body))
        assert len(encode_destination_task(task)) < MAX_MESSAGE_BYTES


class TestDeliveryId:
    def test_the_same_event_routing_and_route_give_the_same_id(self) -> None:
        event, chain = new_id(IdPrefix.EVENT), new_id(IdPrefix.CHAIN)
        assert delivery_id(event, "rt_1", event) == delivery_id(event, "rt_1", event)
        assert delivery_id(event, "rt_1", event) != delivery_id(event, "rt_2", event)
        assert delivery_id(chain, "rt_1", event) != delivery_id(event, "rt_1", event)

    def test_an_id_names_its_event_whichever_routing_made_it(self) -> None:
        event, chain = new_id(IdPrefix.EVENT), new_id(IdPrefix.CHAIN)
        assert event_of(delivery_id(event, "rt_1", event)) == event
        assert event_of(delivery_id(chain, "rt_1", event)) == event

    @pytest.mark.parametrize(
        "value",
        ["", "dlv_", "evt_01jd3kxq8s9y0000000000000a", "dlv_abc_def_ghi", "att_" + "0" * 26 + "_x_y",
         "dlv_" + "0" * 26 + "_x", "dlv_" + "0" * 26 + "_x_y_z", "dlv_" + "!" * 26 + "_x_y"],
    )  # fmt: skip
    def test_anything_else_names_no_event(self, value: str) -> None:
        assert event_of(value) is None

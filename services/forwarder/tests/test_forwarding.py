"""Delivery end to end: real Kafka, the forwarder in this process, a real local destination."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from aiokafka import AIOKafkaProducer

from hookbay_common.models import Attempt, AttemptTrigger, Event
from hookbay_common.wire import decode_attempt, decode_event, encode_event
from hookbay_forwarder.settings import ForwarderSettings
from tests.support.factories import create_event, unique_name
from tests.support.kafka import Message, TopicReader
from tests.support.receiver import Receiver, Reply


async def send(producer: AIOKafkaProducer, fs: ForwarderSettings, *events: Event) -> None:
    for event in events:
        await producer.send_and_wait(
            fs.topics.events, encode_event(event), key=event.username.encode()
        )


@pytest.fixture
async def attempts(fwd_settings: ForwarderSettings) -> AsyncIterator[TopicReader[Attempt]]:
    reader = TopicReader(fwd_settings.kafka_bootstrap, fwd_settings.topics.attempts, decode_attempt)
    await reader.start()
    yield reader
    await reader.stop()


@pytest.fixture
async def dead_letters(fwd_settings: ForwarderSettings) -> AsyncIterator[TopicReader[bytes]]:
    reader = TopicReader(fwd_settings.kafka_bootstrap, fwd_settings.topics.events_dlq, bytes)
    await reader.start()
    yield reader
    await reader.stop()


def chain_of(event: Event, count: int):  # type: ignore[no-untyped-def]
    """A condition: ``count`` attempts of ``event`` were read."""
    return lambda msgs: len(of(msgs, event)) >= count


def of(messages: list[Message[Attempt]], event: Event) -> list[Attempt]:
    return sorted(
        (m.value for m in messages if m.value.event_id == event.id), key=lambda a: a.number
    )


@pytest.mark.usefixtures("forwarder")
class TestDelivery:
    async def test_success(self, receiver: Receiver, producer: AIOKafkaProducer,
                           fwd_settings: ForwarderSettings, attempts: TopicReader[Attempt]) -> None:  # fmt: skip
        url = receiver.url(Reply(200, b'{"thanks": true}', {"x-answer": "42"}))
        event = create_event(username=unique_name("u"), forward_url=url, body=b'{"n": 1}')
        await send(producer, fwd_settings, event)
        (got,) = await receiver.wait_for(url, 1)
        assert got.body == b'{"n": 1}'
        assert got.header("x-hookbay-event-id") == event.id
        assert got.header("x-hookbay-request-id") == event.request_id
        assert got.header("x-hookbay-attempt") == "1"
        (attempt,) = of(await attempts.until(chain_of(event, 1)), event)
        assert attempt.status_code == 200
        assert attempt.trigger is AttemptTrigger.INITIAL
        assert attempt.response_body == b'{"thanks": true}'
        assert attempt.response_headers["x-answer"] == "42"
        assert attempt.url == url
        assert attempt.will_retry is False
        assert attempt.latency_ms is not None
        assert attempt.latency_ms > 0

    async def test_500_then_200(self, receiver: Receiver, producer: AIOKafkaProducer,
                                fwd_settings: ForwarderSettings, attempts: TopicReader[Attempt]) -> None:  # fmt: skip
        url = receiver.url(Reply(500, b"down"))
        event = create_event(username=unique_name("u"), forward_url=url)
        await send(producer, fwd_settings, event)
        first, second = await receiver.wait_for(url, 2)
        assert [first.header("x-hookbay-attempt"), second.header("x-hookbay-attempt")] == ["1", "2"]
        assert second.at - first.at >= 1.0  # the schedule's second entry (0,1s,2s)
        one, two = of(await attempts.until(chain_of(event, 2)), event)
        assert (one.status_code, one.will_retry, one.trigger) == (500, True, AttemptTrigger.INITIAL)
        assert one.next_retry_at is not None
        assert one.next_retry_at - one.started_at >= timedelta(seconds=1)
        assert (two.status_code, two.will_retry, two.trigger) == (200, False, AttemptTrigger.RETRY)
        assert one.chain_id == two.chain_id

    async def test_400_fails_at_once_and_is_dead_lettered(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings,
        attempts: TopicReader[Attempt], dead_letters: TopicReader[bytes],
    ) -> None:  # fmt: skip
        url = receiver.url(Reply(400, b"bad"))
        event = create_event(username=unique_name("u"), forward_url=url)
        await send(producer, fwd_settings, event)
        (attempt,) = of(await attempts.until(chain_of(event, 1)), event)
        assert (attempt.status_code, attempt.will_retry) == (400, False)
        msgs = await dead_letters.until(
            lambda ms: any(decode_event(m.value).id == event.id for m in ms)
        )
        (dead,) = [m for m in msgs if decode_event(m.value).id == event.id]
        assert dead.headers["reason"] == b"delivery_failed"
        assert decode_event(dead.value) == event
        assert len(receiver.received(url)) == 1

    async def test_timeout_is_retried(self, receiver: Receiver, producer: AIOKafkaProducer,
                                      fwd_settings: ForwarderSettings, attempts: TopicReader[Attempt]) -> None:  # fmt: skip
        gate = asyncio.Event()
        url = receiver.url(Reply(200, gate=gate))
        event = create_event(username=unique_name("u"), forward_url=url)
        await send(producer, fwd_settings, event)
        one, two = of(await attempts.until(chain_of(event, 2)), event)
        gate.set()
        assert one.status_code is None
        assert one.error is not None
        assert one.error.startswith("timeout")
        assert one.will_retry is True
        assert two.status_code == 200

    async def test_retry_after_is_honoured(self, receiver: Receiver, producer: AIOKafkaProducer,
                                           fwd_settings: ForwarderSettings, attempts: TopicReader[Attempt]) -> None:  # fmt: skip
        url = receiver.url(Reply(429, b"slow down", {"retry-after": "2"}))
        event = create_event(username=unique_name("u"), forward_url=url)
        await send(producer, fwd_settings, event)
        first, second = await receiver.wait_for(url, 2)
        assert second.at - first.at >= 2.0  # longer than the scheduled 1 s
        one, _ = of(await attempts.until(chain_of(event, 2)), event)
        assert one.next_retry_at is not None
        assert one.next_retry_at - one.started_at >= timedelta(seconds=2)

    async def test_exhausted_retries_fail_and_dead_letter(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings,
        attempts: TopicReader[Attempt], dead_letters: TopicReader[bytes],
    ) -> None:  # fmt: skip
        url = receiver.url(then=Reply(503, b"still down"))
        event = create_event(username=unique_name("u"), forward_url=url)
        await send(producer, fwd_settings, event)
        chain = of(await attempts.until(chain_of(event, 3)), event)
        assert [(a.number, a.will_retry) for a in chain] == [(1, True), (2, True), (3, False)]
        assert [a.trigger for a in chain] == [
            AttemptTrigger.INITIAL,
            AttemptTrigger.RETRY,
            AttemptTrigger.RETRY,
        ]
        await dead_letters.until(lambda ms: any(decode_event(m.value).id == event.id for m in ms))
        assert len(receiver.received(url)) == 3

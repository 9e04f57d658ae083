"""Delivery end to end: real Kafka, the forwarder in this process, a real local destination."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import pytest
from aiokafka import AIOKafkaProducer

from hookbay_common.clock import utcnow
from hookbay_common.models import Attempt, AttemptTrigger, DeliveryTask, Event
from hookbay_common.settings import Settings
from hookbay_common.wire import decode_attempt, decode_event, encode_event, encode_task
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.process import EXIT_DEAD_LETTER_LIMIT
from hookbay_forwarder.settings import ForwarderSettings
from tests.support.factories import create_event, unique_name
from tests.support.forwarder import forwarder_namespace, running
from tests.support.kafka import Message, TopicReader
from tests.support.net import free_port
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


def chain_of(event: Event, count: int) -> Callable[[list[Message[Attempt]]], bool]:
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

    async def test_long_answer_is_kept_to_64_kib_and_flagged(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings,
        attempts: TopicReader[Attempt],
    ) -> None:  # fmt: skip
        answer = bytes(i % 256 for i in range(70_000))
        url = receiver.url(Reply(200, answer))
        event = create_event(username=unique_name("u"), forward_url=url)
        await send(producer, fwd_settings, event)
        (attempt,) = of(await attempts.until(chain_of(event, 1)), event)
        assert attempt.response_body == answer[: 64 * 1024]
        assert attempt.response_body_truncated is True

    async def test_connection_refused_is_retried(
        self, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings,
        attempts: TopicReader[Attempt],
    ) -> None:  # fmt: skip
        url = f"http://127.0.0.1:{free_port()}/nobody-listens"
        event = create_event(username=unique_name("u"), forward_url=url)
        await send(producer, fwd_settings, event)
        one, two, three = of(await attempts.until(chain_of(event, 3)), event)
        assert one.status_code is None
        assert one.error is not None
        assert one.error.startswith("connection failed")
        assert (one.will_retry, two.will_retry, three.will_retry) == (True, True, False)

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


@pytest.mark.usefixtures("forwarder")
class TestFidelity:
    async def test_binary_body_and_headers_arrive_byte_exact(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings
    ) -> None:
        url = receiver.url()
        body = bytes(range(256)) * 3 + b"\xff\xfe\x00"
        headers = {
            "content-type": "application/octet-stream",
            "x-custom": "caf\xe9, two",  # latin-1 byte 0xe9, a joined repeat
            "x.dotted": "$v",
            "host": "sender.example",
            "connection": "keep-alive, x-private",
            "x-private": "named by Connection",
            "keep-alive": "timeout=5",
            "transfer-encoding": "chunked",
            "content-length": "999",
            "x-hookbay-event-id": "spoofed",
        }
        event = create_event(
            username=unique_name("u"), forward_url=url, body=body, request_headers=headers
        )
        await send(producer, fwd_settings, event)
        (got,) = await receiver.wait_for(url, 1)
        assert got.body == body
        names = [name.decode() for name, _ in got.headers]
        assert got.header("x-custom") == "caf\xe9, two"
        assert got.header("x.dotted") == "$v"
        assert got.header("content-type") == "application/octet-stream"
        assert got.header("content-length") == str(len(body))
        assert got.header("host") == url.split("/")[2]
        assert got.header("x-hookbay-event-id") == event.id
        assert names.count("x-hookbay-event-id") == 1
        for dropped in ("connection", "x-private", "keep-alive", "transfer-encoding"):
            assert dropped not in names

    async def test_utf8_header_bytes_arrive_exact(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings
    ) -> None:
        url = receiver.url()
        value = "caf\xc3\xa9 \xe2\x9c\x93"  # the bytes of "café ✓" as captured (latin-1)
        event = create_event(
            username=unique_name("u"), forward_url=url, request_headers={"x-note": value}
        )
        await send(producer, fwd_settings, event)
        (got,) = await receiver.wait_for(url, 1)
        assert got.header("x-note") == value
        assert got.header("content-type") is None  # none sent, none added
        assert got.header("accept-encoding") is None

    async def test_largest_body_is_delivered(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings
    ) -> None:
        url = receiver.url()
        body = bytes(i % 251 for i in range(4_500_000))
        event = create_event(username=unique_name("u"), forward_url=url, body=body)
        await send(producer, fwd_settings, event)
        (got,) = await receiver.wait_for(url, 1)
        assert got.body == body


@pytest.mark.usefixtures("forwarder")
class TestOrderingAndIsolation:
    async def test_each_owners_events_arrive_in_order(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings
    ) -> None:
        owners = [unique_name("u") for _ in range(3)]
        urls = {owner: receiver.url() for owner in owners}
        sent: dict[str, list[str]] = {owner: [] for owner in owners}
        events = []
        for i in range(40):
            owner = owners[i % 3]
            event = create_event(username=owner, forward_url=urls[owner], body=str(i).encode())
            sent[owner].append(event.id)
            events.append(event)
        await asyncio.gather(*(
            producer.send_and_wait(fwd_settings.topics.events, encode_event(e), key=e.username.encode())
            for e in events
        ))  # fmt: skip
        for owner in owners:
            got = await receiver.wait_for(urls[owner], len(sent[owner]))
            assert [r.header("x-hookbay-event-id") for r in got] == sent[owner]

    async def test_a_hanging_destination_does_not_delay_another_owner(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings
    ) -> None:
        gate = asyncio.Event()
        slow_url = receiver.url(then=Reply(200, gate=gate))
        fast_url = receiver.url()
        slow_owner = unique_name("slow")
        slow = [create_event(username=slow_owner, forward_url=slow_url) for _ in range(3)]
        fast_owner = unique_name("fast")
        fast = [create_event(username=fast_owner, forward_url=fast_url) for _ in range(5)]
        await send(producer, fwd_settings, *slow)
        await receiver.wait_for(slow_url, 1)  # the slow owner's first attempt is hanging now
        await send(producer, fwd_settings, *fast)
        got = await receiver.wait_for(fast_url, 5)
        assert not gate.is_set()  # delivered while the other owner's destination hangs
        assert [r.header("x-hookbay-event-id") for r in got] == [e.id for e in fast]
        gate.set()


@pytest.fixture(scope="module")
async def guarded(settings: Settings) -> AsyncIterator[ForwarderSettings]:
    """A forwarder as deployed: private destinations not allowed."""
    fs = await forwarder_namespace(settings, allow_private_destinations=False)
    async with running(Forwarder(fs)):
        yield fs


async def only_attempt(fs: ForwarderSettings, producer: AIOKafkaProducer, url: str) -> Attempt:
    reader = TopicReader(fs.kafka_bootstrap, fs.topics.attempts, decode_attempt)
    await reader.start()
    try:
        event = create_event(username=unique_name("u"), forward_url=url)
        await send(producer, fs, event)
        (attempt,) = of(await reader.until(chain_of(event, 1)), event)
    finally:
        await reader.stop()
    return attempt


class TestDestinationGuard:
    async def test_private_address_is_refused_at_delivery(
        self, guarded: ForwarderSettings, receiver: Receiver, producer: AIOKafkaProducer
    ) -> None:
        url = receiver.url()
        attempt = await only_attempt(guarded, producer, url)
        assert attempt.status_code is None
        assert attempt.error is not None
        assert "destination not allowed" in attempt.error
        assert "127.0.0.1" in attempt.error
        assert attempt.will_retry is False
        assert receiver.received(url) == []

    async def test_a_name_resolving_to_a_private_address_is_refused(
        self, guarded: ForwarderSettings, receiver: Receiver, producer: AIOKafkaProducer
    ) -> None:
        url = receiver.url()
        attempt = await only_attempt(guarded, producer, url.replace("127.0.0.1", "localhost"))
        assert attempt.error is not None
        assert attempt.error.startswith("destination not allowed: 'localhost' resolves to")
        assert attempt.will_retry is False
        assert receiver.received(url) == []


@pytest.mark.usefixtures("forwarder")
class TestReplayAndPoison:
    async def test_a_replay_runs_a_new_chain(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings,
        attempts: TopicReader[Attempt],
    ) -> None:  # fmt: skip
        url = receiver.url()
        event = create_event(username=unique_name("u"), forward_url="http://127.0.0.1:9/old")
        task = DeliveryTask.replay(event, url, now=utcnow())
        await producer.send_and_wait(
            fwd_settings.topics.replays, encode_task(task), key=event.id.encode()
        )
        (got,) = await receiver.wait_for(url, 1)
        assert got.header("x-hookbay-attempt") == "1"
        (attempt,) = of(await attempts.until(chain_of(event, 1)), event)
        assert (attempt.trigger, attempt.chain_id, attempt.status_code) == (
            AttemptTrigger.REPLAY, task.chain_id, 200,
        )  # fmt: skip

    async def test_unreadable_message_is_dead_lettered_and_the_next_delivered(
        self, receiver: Receiver, producer: AIOKafkaProducer, fwd_settings: ForwarderSettings,
        dead_letters: TopicReader[bytes],
    ) -> None:  # fmt: skip
        owner = unique_name("u")
        await producer.send_and_wait(
            fwd_settings.topics.events, b"\x00not msgpack", key=owner.encode()
        )
        url = receiver.url()
        await send(producer, fwd_settings, create_event(username=owner, forward_url=url))
        await receiver.wait_for(url, 1)
        msgs = await dead_letters.until(lambda ms: any(m.value == b"\x00not msgpack" for m in ms))
        (dead,) = [m for m in msgs if m.value == b"\x00not msgpack"]
        assert dead.headers["reason"] == b"unreadable"


class TestDeadLetterLimit:
    async def test_a_flood_of_dead_letters_across_hosts_stops_the_forwarder(
        self, settings: Settings, receiver: Receiver, producer: AIOKafkaProducer
    ) -> None:
        fs = await forwarder_namespace(
            settings, dlq_limit_window=4, dlq_limit_ratio=0.5, dlq_limit_min_hosts=2
        )
        bad = receiver.url(then=Reply(400, b"no"))
        urls = [bad, bad.replace("127.0.0.1", "localhost")] * 2
        events = [create_event(username=unique_name("u"), forward_url=u) for u in urls]
        process = Forwarder(fs)
        async with running(process) as task:
            await send(producer, fs, *events)
            status = await asyncio.wait_for(asyncio.shield(task), 60)
        assert status == EXIT_DEAD_LETTER_LIMIT


class TestRestart:
    async def test_a_waiting_retry_survives_a_restart(
        self, settings: Settings, receiver: Receiver, producer: AIOKafkaProducer
    ) -> None:
        fs = await forwarder_namespace(settings, retry_schedule="0,3s")
        reader = TopicReader(fs.kafka_bootstrap, fs.topics.attempts, decode_attempt)
        await reader.start()
        url = receiver.url(Reply(503, b"later"))
        event = create_event(username=unique_name("u"), forward_url=url)
        try:
            async with running(Forwarder(fs)):
                await send(producer, fs, event)
                (first,) = of(await reader.until(chain_of(event, 1)), event)
                assert first.will_retry  # due in 3 s: this forwarder stops before then
            assert len(receiver.received(url)) == 1
            async with running(Forwarder(fs)):
                await receiver.wait_for(url, 2)
                _, second = of(await reader.until(chain_of(event, 2)), event)
        finally:
            await reader.stop()
        assert (second.number, second.status_code, second.trigger) == (2, 200, AttemptTrigger.RETRY)

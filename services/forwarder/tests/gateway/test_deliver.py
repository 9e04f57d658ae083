"""The lanes' deliver function with a scripted deliverer and a writer that keeps what it is
given: the destination's URL, timeout and headers at the time of the attempt; its retry schedule
and ``Retry-After``; which topic a retry waits in; a deleted destination's delivery failing.
(End to end: services/dashboard-api/tests/test_routed_delivery.py.)"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from pydantic import SecretStr

from hookbay_common.clock import utcnow
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import AttemptTrigger, DeliveryStatus, DeliveryTask, Destination
from hookbay_common.topics import Topics
from hookbay_common.wire import (
    decode_attempt,
    decode_delivery,
    decode_destination_task,
    is_delivery_record,
)
from hookbay_forwarder.delivery.deliverer import Outcome
from hookbay_forwarder.gateway.clock import ManualClock
from hookbay_forwarder.gateway.deliver import DELIVERING_AFTER, DestinationDelivery
from hookbay_forwarder.writes import Message
from tests.support.factories import create_destination, create_destination_task

TOPICS = Topics("unit")
SCHEDULE = (0.0, 10.0, 60.0)


class Destinations:
    def __init__(self, *destinations: Destination) -> None:
        self.by_id = {d.id: d for d in destinations}

    def destination_by_id(self, destination_id: str) -> Destination | None:
        return self.by_id.get(destination_id)


class Scripted:
    """A deliverer answering ``outcomes`` in turn and keeping what it was asked."""

    def __init__(self, *outcomes: dict[str, Any]) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[DeliveryTask, float | None, Mapping[str, str] | None]] = []

    async def attempt(
        self, task: DeliveryTask, *, within: float | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Outcome:  # fmt: skip
        self.calls.append((task, within, extra_headers))
        return Outcome(utcnow(), **self.outcomes.pop(0))


class Written:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, messages: Sequence[Message]) -> None:
        self.messages.extend(messages)


def delivery(
    deliverer: Scripted, *destinations: Destination
) -> tuple[DestinationDelivery, Written]:
    written = Written()
    deliver = DestinationDelivery(
        Destinations(*destinations), deliverer, written, TOPICS,  # type: ignore[arg-type]
        schedule=SCHEDULE, jitter=0.0, rng=random.Random(1),
    )  # fmt: skip
    return deliver, written


class TestDestinationDelivery:
    async def test_the_destinations_url_timeout_and_headers_as_they_are_now(self) -> None:
        billing = create_destination(
            url="http://127.0.0.1:9/fixed", timeout_s=30,
            headers={"authorization": SecretStr("Bearer t")},
        )  # fmt: skip
        deliverer = Scripted({"status_code": 200})
        deliver, written = delivery(deliverer, billing)
        task = create_destination_task(destination=billing.id)
        assert (await deliver(task)).outcome == "success"
        ((sent, within, headers),) = deliverer.calls
        assert (sent.url, sent.number, within) == ("http://127.0.0.1:9/fixed", 1, 30.0)
        assert headers == {"authorization": "Bearer t"}
        (record,) = written.messages
        attempt = decode_attempt(record.value)
        assert (attempt.delivery_id, attempt.route, attempt.destination) == (
            task.delivery_id, task.route, billing.name,
        )  # fmt: skip
        assert record.key == task.event.id.encode()

    async def test_a_retry_waits_in_the_longest_tier_not_longer_than_its_delay(self) -> None:
        own = create_destination(retry_schedule=("0", "30s", "2h"))
        deliver, written = delivery(Scripted({"status_code": 503}, {"error": "timeout"}), own)
        first = create_destination_task(destination=own.id)
        assert (await deliver(first)).outcome == "retry"
        attempt, retry = written.messages
        assert retry.topic == TOPICS.retry(10.0)  # 30 s: the 10 s tier, the lane waits the rest
        assert retry.key == own.id.encode()
        again = decode_destination_task(retry.value)
        assert (again.attempt, again.trigger) == (2, AttemptTrigger.RETRY)
        assert (
            round((again.not_before - decode_attempt(attempt.value).started_at).total_seconds())
            == 30
        )
        assert (await deliver(again)).outcome == "retry"
        # 2 h: the installation's 1 h tier (``topics.DELAY_TIERS``), then another hop
        assert written.messages[-1].topic == TOPICS.retry(3600.0)

    async def test_a_wait_shorter_than_every_tier_goes_straight_back(self) -> None:
        own = create_destination(retry_schedule=("0", "2s"))
        deliver, written = delivery(Scripted({"status_code": 500}), own)
        await deliver(create_destination_task(destination=own.id))
        assert written.messages[-1].topic == TOPICS.deliveries

    async def test_retry_after_is_honoured_and_the_schedule_ends(self) -> None:
        own = create_destination(retry_schedule=("0", "5s", "10m"))  # Retry-After: up to 10 min
        answers = ({"status_code": 429, "headers": {"retry-after": "120"}}, {"status_code": 500},
                   {"status_code": 503})  # fmt: skip
        deliver, written = delivery(Scripted(*answers), own)
        task = create_destination_task(destination=own.id)
        answered = await deliver(task)
        assert (answered.status, answered.retry_after_s) == (429, 120.0)  # for the breaker
        attempt = decode_attempt(written.messages[0].value)
        assert attempt.next_retry_at is not None
        assert (attempt.next_retry_at - attempt.started_at).total_seconds() == 120
        assert written.messages[1].topic == TOPICS.retry(60.0)
        second = decode_destination_task(written.messages[1].value)
        assert (await deliver(second)).outcome == "retry"
        last = decode_destination_task(written.messages[-1].value)
        assert (await deliver(last)).outcome == "failed"  # the schedule's 3 attempts are made
        assert len(written.messages) == 5

    async def test_no_answer_is_a_status_of_none(self) -> None:
        own = create_destination()
        deliver, _ = delivery(Scripted({"error": "connect failed"}), own)
        answered = await deliver(create_destination_task(destination=own.id))
        assert (answered.status, answered.attempted) == (None, True)

    async def test_a_refused_answer_fails_at_once(self) -> None:
        own = create_destination()
        deliver, written = delivery(Scripted({"status_code": 400}), own)
        assert (await deliver(create_destination_task(destination=own.id))).outcome == "failed"
        (only,) = written.messages
        assert decode_attempt(only.value).will_retry is False

    async def test_a_deleted_destination_fails_its_delivery(self) -> None:
        deliverer = Scripted()
        deliver, written = delivery(deliverer)
        task = create_destination_task()
        answered = await deliver(task)
        assert (answered.outcome, answered.attempted) == ("failed", False)  # the breaker: nothing
        assert deliverer.calls == []
        (record,) = written.messages
        assert is_delivery_record(record.value)
        gone = decode_delivery(record.value)
        assert (gone.id, gone.status, gone.reason, gone.chain) == (
            task.delivery_id, DeliveryStatus.FAILED, "the destination was deleted", task.chain_id,
        )  # fmt: skip

    async def test_a_retried_delivery_whose_destination_was_deleted_fails_in_its_chain(
        self,
    ) -> None:
        """A delivery retried on its own waits as ``scheduled`` in a new chain: its failure
        must be of that chain too, or the ``scheduled`` would stand over it."""
        deliverer = Scripted()
        deliver, written = delivery(deliverer)
        first = create_destination_task()
        retried = dataclasses.replace(first, chain_id=new_id(IdPrefix.CHAIN))
        await deliver(retried)
        (record,) = written.messages
        gone = decode_delivery(record.value)
        scheduled = gone.model_copy(update={"status": DeliveryStatus.SCHEDULED})
        assert gone.chain == retried.chain_id
        assert gone.supersedes(scheduled)


class Gated(Scripted):
    """Answers like ``Scripted`` once ``gate`` is set."""

    def __init__(self, *outcomes: dict[str, Any]) -> None:
        super().__init__(*outcomes)
        self.gate = asyncio.Event()

    async def attempt(
        self, task: DeliveryTask, *, within: float | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Outcome:  # fmt: skip
        await self.gate.wait()
        return await super().attempt(task, within=within, extra_headers=extra_headers)


class TestDelivering:
    def deliver(self, deliverer: Scripted, destination: Destination) -> tuple[
        DestinationDelivery, Written, ManualClock
    ]:  # fmt: skip
        written, clock = Written(), ManualClock()
        deliver = DestinationDelivery(
            Destinations(destination), deliverer, written, TOPICS,  # type: ignore[arg-type]
            schedule=SCHEDULE, jitter=0.0, rng=random.Random(1), clock=clock,
            delivering_after=DELIVERING_AFTER,
        )  # fmt: skip
        return deliver, written, clock

    async def test_an_attempt_running_long_is_recorded_delivering_and_its_end_stands_over_it(
        self,
    ) -> None:
        slow = create_destination()
        deliverer = Gated({"status_code": 503})
        deliver, written, clock = self.deliver(deliverer, slow)
        task = create_destination_task(destination=slow.id)
        running = asyncio.ensure_future(deliver(task))
        await clock.advance(DELIVERING_AFTER - 0.001)
        assert written.messages == []
        await clock.advance(0.001)
        (first,) = written.messages
        delivering = decode_delivery(first.value)
        assert (delivering.id, delivering.status, delivering.destination, delivering.chain) == (
            task.delivery_id, DeliveryStatus.DELIVERING, slow.name, task.chain_id,
        )  # fmt: skip
        assert first.key == task.event.id.encode()
        assert not running.done()

        deliverer.gate.set()
        assert (await running).outcome == "retry"
        scheduled = decode_attempt(written.messages[1].value).as_delivery()
        assert scheduled is not None
        assert scheduled.status is DeliveryStatus.SCHEDULED
        assert scheduled.supersedes(delivering)  # the retry's wait, not a stale "delivering"
        assert not delivering.supersedes(scheduled)

    async def test_an_attempt_ending_sooner_writes_nothing_more(self) -> None:
        quick = create_destination()
        deliverer = Gated({"status_code": 200})
        deliver, written, clock = self.deliver(deliverer, quick)
        running = asyncio.ensure_future(deliver(create_destination_task(destination=quick.id)))
        await clock.advance(1.0)
        deliverer.gate.set()
        assert (await running).outcome == "success"
        await clock.advance(10.0)
        (only,) = written.messages
        assert not is_delivery_record(only.value)

    async def test_a_stopping_lane_cancels_the_attempt(self) -> None:
        hanging = create_destination()
        deliverer = Gated({"status_code": 200})
        deliver, written, clock = self.deliver(deliverer, hanging)
        running = asyncio.ensure_future(deliver(create_destination_task(destination=hanging.id)))
        await clock.advance(0.5)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await clock.advance(10.0)
        assert written.messages == []

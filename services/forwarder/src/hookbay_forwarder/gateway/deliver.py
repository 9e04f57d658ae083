"""The lanes' deliver function: one attempt of a routed delivery, and what follows from it.

``DestinationDelivery`` looks the destination up (by id, in the routing view) at the time of the
attempt, so a destination fixed while paused gets its held tasks at its fixed URL, with its
timeout and its headers (which replace the sender's of the same names). It writes, in one
durable write (``hookbay_forwarder.writes``), the attempt (carrying the delivery id, the route
and the destination's name: it moves the delivery's status) and, when the destination's retry
schedule says so, the next attempt's task.

A retry waits in the installation's delay tiers (``Topics.retry``) like a ``forward_url``
retry, hop by hop through the tier that fits what is left of its wait
(``hookbay_forwarder.waiting``: a destination's own schedule need not match the tiers); the
task consumer hands it back to the deliveries topic once less than the shortest tier is left,
and the lane waits out that remainder. A wait shorter than every tier goes straight back to
the deliveries topic.

A destination deleted since the task was made: the delivery fails with that reason (and no
request goes out: ``Delivered.attempted`` is false). A route that runs a transformation
(``transform``, ``gateway.transform``) has it run first: its request is sent instead, and its
trace rides on the attempt; a failing one ends the delivery ``transform_failed`` (not attempted).

What the destination answered goes back to the lane (``Delivered``) for its circuit breaker: the
status (``None`` when no answer came, a refused address included) and a 429's or 503's
``Retry-After``.

An attempt still running after ``DELIVERING_AFTER`` seconds (on the lanes' clock) gets a
``delivering`` record, so a slow or hanging destination shows what it is doing; an attempt that
ends sooner (nearly all of them) writes nothing more. The record is dated a millisecond before
the attempt began, so the attempt's own record (dated at its start) stands over it whatever it
says, ``scheduled`` for a retry included (``Delivery.supersedes``: the later ``at`` among
unfinished statuses).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Final, Protocol

from hookbay_common.clock import utcnow
from hookbay_common.logs import get_logger
from hookbay_common.models import (
    AttemptTrigger,
    Delivery,
    DeliveryStatus,
    DeliveryTask,
    Destination,
)
from hookbay_common.routing.tasks import DestinationTask
from hookbay_common.settings import parse_duration
from hookbay_common.topics import Topics, delay_tiers
from hookbay_common.wire import encode_attempt, encode_delivery, encode_destination_task
from hookbay_forwarder.delivery.deliverer import Deliverer, Outcome
from hookbay_forwarder.delivery.retry import (
    RETRY_AFTER_STATUSES,
    RetryPolicy,
    is_retryable,
    parse_retry_after,
)
from hookbay_forwarder.gateway.clock import Clock, SystemClock
from hookbay_forwarder.gateway.lanes import Delivered
from hookbay_forwarder.gateway.transform import TransformFailed, TransformStep
from hookbay_forwarder.waiting import Waiting
from hookbay_forwarder.writes import Message

log = get_logger("hookbay.forwarder")
Write = Callable[[Sequence[Message]], Awaitable[None]]

DELIVERING_AFTER: Final = 2.0
"""Seconds an attempt runs before its delivery is recorded ``delivering``."""


class DestinationLookup(Protocol):
    def destination_by_id(self, destination_id: str) -> Destination | None: ...


class DestinationDelivery:
    def __init__(
        self,
        view: DestinationLookup,
        deliverer: Deliverer,
        write: Write,
        topics: Topics,
        *,
        schedule: tuple[float, ...],
        jitter: float,
        rng: random.Random | None = None,
        clock: Clock | None = None,
        delivering_after: float = DELIVERING_AFTER,
        transform: TransformStep | None = None,
    ) -> None:
        self._view = view
        self._transform = transform
        self._clock = clock or SystemClock()
        self._delivering_after = delivering_after
        self._deliverer = deliverer
        self._write = write
        self._topics = topics
        self._default = RetryPolicy(schedule, jitter)
        self._waiting = Waiting(topics, delay_tiers(schedule[1:]))
        self._jitter = jitter
        self._rng = rng
        self._policies: dict[tuple[str, ...], RetryPolicy] = {}

    async def __call__(self, task: DestinationTask) -> Delivered:
        destination = self._view.destination_by_id(task.destination)
        if destination is None:
            await self._write([self._gone(task)])
            return Delivered("failed", status=None, attempted=False)
        request = DeliveryTask(
            event=task.event, chain_id=task.chain_id, trigger=task.trigger,
            number=task.attempt, url=destination.url, not_before=task.not_before,
        )  # fmt: skip
        prepared = None
        if self._transform is not None and self._transform.applies(task):
            prepared = await self._transform.prepare(task)
        if isinstance(prepared, TransformFailed):
            await self._write([prepared.record(task, destination.name, self._topics)])
            return Delivered("transform_failed", status=None, attempted=False)
        if prepared is not None:
            request = prepared.apply(request)
        outcome = await self._attempt(task, destination, request)
        delay = self._next_delay(destination, task, outcome)
        attempt = outcome.attempt(
            request, delay, delivery_id=task.delivery_id, route=task.route,
            destination=destination.name, transform=prepared.trace if prepared else None,
        )  # fmt: skip
        key = task.event.id.encode()
        messages = [Message(self._topics.attempts, encode_attempt(attempt), key)]
        if delay is not None and attempt.next_retry_at is not None:
            retry = dataclasses.replace(
                task, attempt=task.attempt + 1, not_before=attempt.next_retry_at,
                trigger=AttemptTrigger.RETRY
                if task.trigger is AttemptTrigger.INITIAL
                else task.trigger,
            )  # fmt: skip
            messages.append(self._retry_message(retry))
        await self._write(messages)
        status = outcome.status_code
        if status is not None and 200 <= status < 300:
            return Delivered("success", status=status)
        retry_after = None
        if status in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(outcome.headers.get("retry-after"))
        return Delivered(
            "retry" if delay is not None else "failed", status=status,
            retry_after_s=max(0.0, retry_after or 0.0),
        )  # fmt: skip

    async def _attempt(
        self, task: DestinationTask, destination: Destination, request: DeliveryTask
    ) -> Outcome:
        """The attempt, and a ``delivering`` record if it is still running after
        ``delivering_after`` seconds."""
        began = utcnow()
        running = asyncio.ensure_future(self._deliverer.attempt(
            request, within=float(destination.timeout_s),
            extra_headers={k: v.get_secret_value() for k, v in destination.headers.items()},
        ))  # fmt: skip
        timer = asyncio.ensure_future(self._clock.sleep(self._delivering_after))
        try:
            await asyncio.wait((running, timer), return_when=asyncio.FIRST_COMPLETED)
            if not running.done():
                await self._write([self._delivering(task, destination, began)])
            return await running
        finally:
            timer.cancel()
            running.cancel()  # only when this was cancelled (the lanes stopping) or a write failed

    def _delivering(
        self, task: DestinationTask, destination: Destination, began: datetime
    ) -> Message:
        return self._record(
            task, destination.name, DeliveryStatus.DELIVERING, None,
            began - timedelta(milliseconds=1),
        )  # fmt: skip

    def _policy(self, destination: Destination) -> RetryPolicy:
        if destination.retry_schedule is None:
            return self._default
        policy = self._policies.get(destination.retry_schedule)
        if policy is None:
            schedule = tuple(parse_duration(d) for d in destination.retry_schedule)
            policy = self._policies[destination.retry_schedule] = RetryPolicy(
                schedule, self._jitter
            )
        return policy

    def _next_delay(
        self, destination: Destination, task: DestinationTask, outcome: Outcome
    ) -> float | None:
        if outcome.status_code is not None and 200 <= outcome.status_code < 300:
            return None
        if not is_retryable(outcome.status_code, outcome.error, blocked=outcome.blocked):
            return None
        retry_after = None
        if outcome.status_code in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(outcome.headers.get("retry-after"))
        wait = self._policy(destination).next_wait(task.attempt, retry_after, self._rng)
        return wait.delay if wait is not None else None

    def _retry_message(self, retry: DestinationTask) -> Message:
        """Through the delay tiers, hop by hop (``hookbay_forwarder.waiting``), or straight
        back to the deliveries topic when the wait is shorter than every tier."""
        due = int(retry.not_before.timestamp() * 1000)
        return self._waiting.message(encode_destination_task(retry), retry.destination, due)

    def _gone(self, task: DestinationTask) -> Message:
        """The delivery failed, in the task's chain (a retried delivery's record must stand
        over the ``scheduled`` of its retry, ``Delivery.supersedes``)."""
        return self._record(
            task, task.destination, DeliveryStatus.FAILED, "the destination was deleted", utcnow()
        )

    def _record(
        self, task: DestinationTask, destination: str, status: DeliveryStatus,
        reason: str | None, at: datetime,
    ) -> Message:  # fmt: skip
        """A delivery record of ``task``'s delivery, in its chain."""
        event = task.event
        delivery = Delivery(
            id=task.delivery_id, event_id=event.id, webhook_id=event.webhook_id,
            username=event.username, route=task.route, destination=destination,
            status=status, reason=reason, at=at, chain=task.chain_id,
        )  # fmt: skip
        return Message(self._topics.attempts, encode_delivery(delivery), event.id.encode())

"""The forwarder's business: turn an event or a task into an attempt, and decide what follows.

An event of a webhook with routes is first handed to the router (``hookbay_forwarder.routing``),
which writes its deliveries; an event with a ``forward_url`` then gets its first attempt here.
A routed delivery's task (a retry, a route's delay) whose delay tier is due is handed back to
the deliveries topic, or to another tier while it is still not due (``waiting``).

Every handler returns only once everything it decided is durably in Kafka (acks=all,
``hookbay_forwarder.writes``): the attempt record, and the next retry or the dead letter. The
consume loop commits after that.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiokafka.errors import KafkaError
from structlog.contextvars import bound_contextvars

from hookbay_common.ids import IdPrefix, derived_id
from hookbay_common.logs import get_logger
from hookbay_common.models import Attempt, AttemptTrigger, DeliveryTask, EventStatus
from hookbay_common.producer import ResilientProducer
from hookbay_common.topics import DELAY_TIERS, Topics
from hookbay_common.wire import (
    WireError,
    decode_event,
    decode_route_request,
    decode_task,
    encode_attempt,
    encode_event,
    encode_task,
    is_destination_task,
    is_route_request,
    peek_destination_task,
)
from hookbay_forwarder.delivery.consumer import NOT_BEFORE_HEADER
from hookbay_forwarder.delivery.deadletter import DeadLetterLimit, DeadLetterLimitExceeded
from hookbay_forwarder.delivery.deliverer import Deliverer, Outcome
from hookbay_forwarder.delivery.retry import (
    RETRY_AFTER_STATUSES,
    RetryPolicy,
    Wait,
    is_retryable,
    parse_retry_after,
)
from hookbay_forwarder.metrics import ForwarderMetrics
from hookbay_forwarder.routing.router import Router
from hookbay_forwarder.waiting import Waiting
from hookbay_forwarder.writes import DurableWriter, Message

log = get_logger("hookbay.forwarder")


@dataclass
class ForwarderHandlers:
    deliverer: Deliverer
    producer: ResilientProducer
    topics: Topics
    policy: RetryPolicy
    limit: DeadLetterLimit
    metrics: ForwarderMetrics
    router: Router | None = None
    """Routes events of webhooks with routes (``Event.routed``); ``None``: they are not routed."""
    tiers: tuple[float, ...] = DELAY_TIERS
    """The installation's delay tiers (``Settings.delay_tiers``), for routed tasks' hops."""

    def __post_init__(self) -> None:
        self.write = DurableWriter(self.producer, self.metrics).write
        self.waiting = Waiting(self.topics, self.tiers)

    async def on_event(self, record: Any) -> None:
        """A captured event: routed over its webhook's routes when it had some, and its first
        attempt to its ``forward_url`` when it has one. One with nothing to deliver (rejected
        by its signature, a handshake, or no destination) the recorder settles on its own."""
        try:
            event = decode_event(record.value)
        except WireError as exc:
            await self._unreadable(record, str(exc))
            return
        if event.deliverable and event.routed and self.router is not None:
            await self.router.route(event)
        if not event.forwardable:
            return
        assert event.forward_url is not None
        task = DeliveryTask(
            event=event,
            chain_id=derived_id(IdPrefix.CHAIN, event.id),  # a redo continues the same chain
            trigger=AttemptTrigger.INITIAL,
            number=1,
            url=event.forward_url,
            not_before=event.created_at,
        )
        await self._guarded(record, task)

    async def on_task(self, record: Any) -> None:
        """A retry that is due, or a replay. A routed delivery's retry goes back to the
        deliveries topic, to its destination's lane (which makes the attempt); a routed event's
        replay is routed again over its webhook's current routes."""
        if is_destination_task(record.value):
            await self._requeue(record)
            return
        if is_route_request(record.value):
            await self._reroute(record)
            return
        try:
            task = decode_task(record.value)
        except WireError as exc:
            await self._unreadable(record, str(exc))
            return
        await self._guarded(record, task)

    async def _requeue(self, record: Any) -> None:
        """A routed delivery's task whose tier is due: on to the deliveries topic, or, while
        it is still not due by the shortest tier or more, into the tier that fits what is
        left (``hookbay_forwarder.waiting``)."""
        try:
            fields = peek_destination_task(record.value)
            destination, not_before = str(fields["destination"]), int(fields["not_before"])
        except (WireError, KeyError, TypeError, ValueError) as exc:
            await self._unreadable(record, str(exc))
            return
        await self.write([self.waiting.message(record.value, destination, not_before)])

    async def _reroute(self, record: Any) -> None:
        try:
            event, chain_id = decode_route_request(record.value)
        except WireError as exc:
            await self._unreadable(record, str(exc))
            return
        if self.router is None:
            log.warning("route_request_dropped", event_id=event.id, reason="no router")
            return
        await self.router.route(event, trigger=AttemptTrigger.REPLAY, source_id=chain_id)

    async def _guarded(self, record: Any, task: DeliveryTask) -> None:
        try:
            await self.run(
                task, topic=record.topic, partition=record.partition, offset=record.offset
            )
        except (KafkaError, DeadLetterLimitExceeded, asyncio.CancelledError):
            raise  # not the message's fault: stop, redo it later
        except Exception as exc:  # a bug for this message: park it, keep the others flowing
            log.exception("task_crashed", event_id=task.event.id)
            await self._dead_letter(
                encode_task(task), key=task.event.username.encode(), reason="internal_error",
                detail=type(exc).__name__,
            )  # fmt: skip
            self.limit.invalid()

    async def run(self, task: DeliveryTask, **where: Any) -> Attempt:
        """Make one attempt and write down what follows from it. ``where`` (topic, partition,
        offset) is bound to every log line, with the event id, chain id and attempt number."""
        event = task.event
        context = {"event_id": event.id, "chain_id": task.chain_id, "attempt": task.number}
        with bound_contextvars(**context, **where):
            outcome = await self.deliverer.attempt(task)
            wait = self._next_wait(task, outcome)
            attempt = outcome.attempt(task, wait.delay if wait is not None else None)
            key = event.id.encode()
            messages = [Message(self.topics.attempts, encode_attempt(attempt), key)]
            if wait is not None and attempt.next_retry_at is not None:
                retry = task.model_copy(
                    update={
                        "number": task.number + 1,
                        "trigger": AttemptTrigger.RETRY
                        if task.trigger is AttemptTrigger.INITIAL
                        else task.trigger,  # a replay's retries stay in the replay chain
                        "not_before": attempt.next_retry_at,
                    }
                )
                topic = self.topics.retry(wait.tier)
                headers = [(NOT_BEFORE_HEADER, _ms(retry.not_before))]
                messages.append(Message(topic, encode_task(retry), key, headers))
                log.info(
                    "retry_scheduled", status=outcome.status_code, error=outcome.error,
                    topic=topic, next_retry_at=retry.not_before.isoformat(),
                )  # fmt: skip
            elif attempt.outcome is EventStatus.FAILED:
                reason = outcome.error or f"status {outcome.status_code}"
                headers = _dlq_headers("delivery_failed", reason, task.chain_id)
                dead = Message(
                    self.topics.events_dlq, encode_event(event), event.username.encode(), headers
                )
                messages.append(dead)
            await self.write(messages)  # every acknowledgement, or raise
            self._count(attempt, outcome, task)
            return attempt

    def _next_wait(self, task: DeliveryTask, outcome: Outcome) -> Wait | None:
        if outcome.status_code is not None and 200 <= outcome.status_code < 300:
            return None
        if not is_retryable(outcome.status_code, outcome.error, blocked=outcome.blocked):
            return None
        retry_after = None
        if outcome.status_code in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(outcome.headers.get("retry-after"))
        return self.policy.next_wait(task.number, retry_after)

    def _count(self, attempt: Attempt, outcome: Outcome, task: DeliveryTask) -> None:
        if outcome.latency_ms is not None:
            self.metrics.attempt_latency.observe(outcome.latency_ms / 1000)
        result = attempt.outcome
        if result is EventStatus.PENDING:
            self.metrics.attempts.labels("retry").inc()
            return
        self.metrics.attempts.labels(result.value).inc()
        if result is EventStatus.FAILED:  # successes are on the attempts topic; no line each
            log.info("chain_failed", status=outcome.status_code, error=outcome.error)
            self.metrics.dead_lettered.labels("delivery_failed").inc()
            self.limit.chain_ended(dead_letter_host=urlsplit(task.url).hostname or "-")
        else:
            self.limit.chain_ended(dead_letter_host=None)

    async def _unreadable(self, record: Any, problem: str) -> None:
        log.error(
            "unreadable_message", problem=problem, topic=record.topic, partition=record.partition,
            offset=record.offset,
        )  # fmt: skip
        await self._dead_letter(record.value, key=record.key, reason="unreadable", detail=problem)
        self.limit.invalid()

    async def _dead_letter(
        self, value: bytes, *, key: bytes | None, reason: str, detail: str
    ) -> None:
        headers = _dlq_headers(reason, detail, None)
        await self.write([Message(self.topics.events_dlq, value, key, headers)])
        self.metrics.dead_lettered.labels(reason).inc()


def _dlq_headers(reason: str, detail: str, chain_id: str | None) -> list[tuple[str, bytes]]:
    headers = [("reason", reason.encode()), ("detail", detail[:500].encode())]
    if chain_id is not None:
        headers.append(("chain-id", chain_id.encode()))
    return headers


def _ms(when: Any) -> bytes:
    return str(int(when.timestamp() * 1000)).encode()

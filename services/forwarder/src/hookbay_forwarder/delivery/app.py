"""The forwarder role, wired from settings: the process that delivers.

Consumer group ``<namespace>.forwarder`` on the events topic (first attempts, ordered per owner)
and ``<namespace>.forwarder-tasks`` on the retry tiers and replays. The ``Process`` contract
(start, run, stop, readiness and liveness) is in ``hookbay_forwarder.process``; readiness here
also needs the producer able to send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hookbay_common.kafka import create_consumer, ensure_configured_topics
from hookbay_common.logs import get_logger
from hookbay_common.producer import ResilientProducer
from hookbay_forwarder.delivery.consumer import HandlerCrashed, OrderedConsumer
from hookbay_forwarder.delivery.deadletter import DeadLetterLimit, DeadLetterLimitExceeded
from hookbay_forwarder.delivery.deliverer import Deliverer, create_clients, create_session
from hookbay_forwarder.delivery.handlers import ForwarderHandlers
from hookbay_forwarder.delivery.retry import RetryPolicy
from hookbay_forwarder.metrics import ForwarderMetrics
from hookbay_forwarder.process import (
    EXIT_DEAD_LETTER_LIMIT,
    EXIT_OK,
    OBSERVE_INTERVAL,
    closed,
    exit_status,
    report_lag,
    until_connected,
)
from hookbay_forwarder.settings import ForwarderSettings

log = get_logger("hookbay.forwarder")

FALLBACK_POOLS = 4
"""httpx pools for the rare request whose header bytes are not UTF-8 (see ``Deliverer``)."""


class Forwarder:
    def __init__(self, settings: ForwarderSettings) -> None:
        self.settings = settings
        self.metrics = ForwarderMetrics()
        self.topics = settings.topics
        self._stopping = asyncio.Event()
        self._started = False
        self.producer = ResilientProducer.from_settings(
            settings, name="hookbay-forwarder", registry=self.metrics.registry
        )
        allow_private = settings.allow_private_destinations
        self.deliverer = Deliverer(
            create_session(allow_private=allow_private, max_connections=settings.max_connections),
            create_clients(FALLBACK_POOLS, allow_private=allow_private, max_connections=100),
            timeout=settings.forward_timeout,
            allow_private=allow_private,
        )
        self.handlers = ForwarderHandlers(
            deliverer=self.deliverer,
            producer=self.producer,
            topics=self.topics,
            policy=RetryPolicy(settings.retry_schedule, settings.retry_jitter),
            limit=DeadLetterLimit(
                window=settings.dlq_limit_window,
                ratio=settings.dlq_limit_ratio,
                min_hosts=settings.dlq_limit_min_hosts,
                max_invalid=settings.dlq_limit_invalid,
            ),
            metrics=self.metrics,
        )
        self.events = self._ordered(f"{self.topics.namespace}.forwarder", self.handlers.on_event)
        self.tasks = self._ordered(
            f"{self.topics.namespace}.forwarder-tasks", self.handlers.on_task
        )

    def _ordered(self, group: str, handler: Callable[[Any], Awaitable[None]]) -> OrderedConsumer:
        s = self.settings
        consumer = create_consumer(
            s.kafka_bootstrap, group_id=group, client_id="hookbay-forwarder",
            session_timeout_ms=s.kafka_session_timeout_ms,
            metadata_max_age_ms=30_000,  # notices new retry tiers (pattern subscription)
        )  # fmt: skip
        return OrderedConsumer(
            consumer, handler, name=group, max_buffered=s.max_buffered_events,
            max_buffered_bytes=s.max_buffered_bytes, revoke_grace=s.shutdown_grace,
            metrics=self.metrics,
        )  # fmt: skip

    def checks(self) -> dict[str, bool]:
        return {
            "kafka": self._started and self.producer.answering,
            "producer": self.producer.ready,
            "events_consumer": self.events.running,
            "tasks_consumer": self.tasks.running,
        }

    def healthy(self) -> bool:
        loops_alive = not (self.events.ended or self.tasks.ended) or self._stopping.is_set()
        return loops_alive and self.producer.healthy

    def request_stop(self) -> None:
        self._stopping.set()
        self.events.stop()
        self.tasks.stop()

    async def start(self) -> None:
        async def connect() -> None:
            await ensure_configured_topics(self.settings)
            await self.producer.start()  # connects in the background, replaces itself if wedged
            await self.producer.wait_ready(within=5.0)
            self.events.consumer.subscribe([self.topics.events], listener=self.events)
            self.tasks.consumer.subscribe(pattern=self.topics.task_pattern, listener=self.tasks)
            await self.events.consumer.start()
            await self.tasks.consumer.start()

        self._started = await until_connected(connect, self._stopping)
        if self._started:
            log.info("forwarder_started", namespace=self.topics.namespace)

    async def run(self) -> int:
        if not self._started:
            return EXIT_OK
        observer = asyncio.create_task(self._observe())
        loops = [asyncio.create_task(c.run()) for c in (self.events, self.tasks)]
        try:
            await asyncio.wait(loops, return_when=asyncio.FIRST_EXCEPTION)
            self.request_stop()
            results = await asyncio.gather(*loops, return_exceptions=True)
        finally:
            observer.cancel()
        return _exit_status(results)

    async def stop(self) -> None:
        grace = self.settings.shutdown_grace
        if self._started:
            await asyncio.gather(self.events.drain(grace), self.tasks.drain(grace))
        for consumer in (self.events.consumer, self.tasks.consumer):
            await closed(consumer.stop(), "consumer")
        await self.producer.stop()  # flushes what is still queued (bounded)
        await self.deliverer.aclose()
        log.info("forwarder_stopped")

    async def _observe(self) -> None:
        while True:
            waiting = 0
            for ordered in (self.events, self.tasks):
                report_lag(self.metrics, ordered.name, ordered.consumer, ordered.lag())
                self.metrics.buffered.labels(ordered.name).set(ordered.buffered)
            for tp, lag in self.tasks.lag().items():
                if tp.topic != self.topics.replays:
                    waiting += lag
            self.metrics.retries_waiting.set(waiting)
            await asyncio.sleep(OBSERVE_INTERVAL)


def _exit_status(results: Sequence[Any]) -> int:
    """``EXIT_DEAD_LETTER_LIMIT`` when a handler tripped the dead-letter limit, else as
    ``exit_status`` says (a crashed handler judged by what it raised)."""
    for result in results:
        if isinstance(result, BaseException):
            cause = result.__cause__ if isinstance(result, HandlerCrashed) else result
            if isinstance(cause, DeadLetterLimitExceeded):
                log.critical("dead_letter_limit_exceeded", reason=str(cause))
                return EXIT_DEAD_LETTER_LIMIT
            return exit_status([cause])
    return EXIT_OK

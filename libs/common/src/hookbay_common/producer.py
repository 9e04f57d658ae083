"""``ResilientProducer``: the one Kafka producer every hookbay process uses, healing itself.

aiokafka's idempotent producer never recovers from a broker that lost or rejected its sequence
state (aio-libs/aiokafka#1017): after ``OutOfOrderSequenceNumber``, ``UnknownProducerId`` or an
epoch the broker no longer knows, every later send fails (or waits forever), and only a new
producer (a new producer id) sends again. librdkafka calls these errors fatal and leaves the new
producer to the application; this module is that application code, in one place.

Contract:

- ``send`` returns a future that resolves only with the broker's acknowledgement (acks=all) and
  fails otherwise: nothing is ever reported as written that was not acknowledged.
- While no producer is running (the broker has not answered yet, or the producer is being
  replaced), ``send`` raises ``ProducerUnavailable`` at once: nothing was sent.
- A supervisor task replaces the producer (closes it, starts a fresh one: a new producer id) when
  a send fails with a fatal error (``FATAL_SEND_ERRORS``), when aiokafka's sender task died, or
  when the producer is *stalled*: for ``reset_after`` seconds no send was acknowledged while sends
  failed or waited, and the broker has answered metadata for ``answer_grace`` seconds (a broker
  that is away is not the producer's fault: the old producer reconnects by itself). Sends still
  waiting on a replaced producer fail with ``ProducerUnavailable``. One replacement at a time,
  with an exponential back-off between replacements that follow each other without a success.
- ``ready``: a producer runs, the broker answered the last metadata probe and the producer is not
  stalled. ``healthy`` turns False only when the producer is wedged beyond what replacing it
  fixes: sends have failed or stalled, with no acknowledgement, for ``wedged_after`` seconds while
  the broker answered metadata (or the supervisor task died, a bug). Orchestrators restart the
  process on that (``/healthz``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from aiokafka.errors import (
    InvalidProducerEpoch,
    KafkaError,
    KafkaTimeoutError,
    OutOfOrderSequenceNumber,
    ProducerFenced,
    UnknownProducerId,
)
from prometheus_client import CollectorRegistry, Counter, Gauge

from hookbay_common.kafka import create_producer, ping
from hookbay_common.logs import get_logger
from hookbay_common.metrics import name as metric_name
from hookbay_common.rdkafka import RdkafkaFatal, RdkafkaProducer
from hookbay_common.settings import Settings

log = get_logger("hookbay.producer")

FATAL_SEND_ERRORS: tuple[type[KafkaError], ...] = (
    OutOfOrderSequenceNumber,
    UnknownProducerId,
    InvalidProducerEpoch,
    ProducerFenced,
    RdkafkaFatal,
)
"""Errors after which this producer will never send again: it is replaced."""

Headers = Sequence[tuple[str, bytes]]


class ProducerUnavailable(KafkaError):  # type: ignore[misc]
    """No producer is running (connecting, or being replaced), or the send was cut short by a
    replacement. The message may or may not be on Kafka; it was not acknowledged. Retriable."""

    retriable = True


def is_retriable(error: BaseException) -> bool:
    """A Kafka error after which the same work succeeds later: a broker, leader or coordinator
    away or moving (aiokafka's ``retriable``), a send not acknowledged in time, or a producer
    error that ``ResilientProducer`` heals by replacing the producer."""
    if isinstance(error, (*FATAL_SEND_ERRORS, ProducerUnavailable, KafkaTimeoutError)):
        return True
    return isinstance(error, KafkaError) and bool(error.retriable)


class InnerProducer(Protocol):
    """What ``ResilientProducer`` needs of an ``AIOKafkaProducer`` (tests pass fakes)."""

    @property
    def client(self) -> Any: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        headers: Headers | None = None,
    ) -> asyncio.Future[Any]: ...  # fmt: skip


ProducerFactory = Callable[[], InnerProducer]


@dataclass(frozen=True)
class ProducerPolicy:
    """When a producer is replaced, and when it counts as wedged (see the module docstring)."""

    reset_after: float = 10.0
    wedged_after: float = 120.0
    answer_grace: float = 2.0
    probe_interval: float = 2.0
    probe_timeout: float = 5.0
    start_timeout: float = 30.0
    close_timeout: float = 10.0
    backoff_min: float = 0.5
    backoff_max: float = 30.0
    reconnect_interval: float = 2.0


class ProducerMetrics:
    """``hookbay_producer_*``, labelled by producer name, in a process's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.resets = Counter(
            metric_name("producer_resets"), "Producers closed and replaced by a fresh one.",
            ["producer", "reason"], registry=registry,
        )  # fmt: skip
        self.send_failures = Counter(
            metric_name("producer_send_failures"), "Sends not acknowledged, by reason.",
            ["producer", "reason"], registry=registry,
        )  # fmt: skip
        self.since_success = Gauge(
            metric_name("producer_seconds_since_success"),
            "Seconds since the last acknowledged send (or since the process started).",
            ["producer"], registry=registry,
        )  # fmt: skip
        self.ready = Gauge(
            metric_name("producer_ready"), "1 while the producer can send (readiness).",
            ["producer"], registry=registry,
        )  # fmt: skip


class ResilientProducer:
    """A self-healing, idempotent (acks=all) producer; see the module docstring.

    ``start()`` returns at once and connects in the background (the process answers 503 for what
    needs Kafka meanwhile); ``wait_ready()`` waits for the first producer; ``stop()`` flushes
    what is queued and closes."""

    def __init__(
        self,
        bootstrap: str,
        *,
        name: str = "hookbay",
        policy: ProducerPolicy | None = None,
        registry: CollectorRegistry | None = None,
        factory: ProducerFactory | None = None,
    ) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.policy = policy or ProducerPolicy()
        self._factory: ProducerFactory = factory or (
            lambda: create_producer(bootstrap, client_id=name)
        )
        self._producer: InnerProducer | None = None
        self._pending: dict[asyncio.Future[Any], float] = {}  # caller's future -> sent at
        self._supervisor: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._fatal: str | None = None
        self.started = asyncio.Event()
        """Set once a producer first started; stays set."""
        now = time.monotonic()
        self._last_success = now
        self._started_at = now
        self._failures = 0  # sends of the current producer failed since its last success
        self._trouble_since: float | None = None  # first failure/stall since the last success
        self._answering_since: float | None = None  # the broker answered every probe since
        self._resets_in_a_row = 0
        self.metrics = ProducerMetrics(registry) if registry is not None else None
        if self.metrics is not None:
            self.metrics.since_success.labels(name).set_function(self.seconds_since_success)
            self.metrics.ready.labels(name).set_function(lambda: float(self.ready))

    @classmethod
    def from_settings(
        cls, settings: Settings, *, name: str, registry: CollectorRegistry | None = None,
        librdkafka: bool = False, delivery_timeout: float = 10.0,
    ) -> ResilientProducer:  # fmt: skip
        """The producer of a hookbay process: its bootstrap servers and reset thresholds; with
        ``librdkafka``, over librdkafka (``hookbay_common.rdkafka``), giving up on a message
        ``delivery_timeout`` seconds after it was sent."""
        policy = ProducerPolicy(
            reset_after=settings.producer_reset_after,
            wedged_after=settings.producer_wedged_after,
        )
        factory: ProducerFactory | None = None
        if librdkafka:
            factory = partial(
                RdkafkaProducer, settings.kafka_bootstrap, client_id=name,
                delivery_timeout=delivery_timeout,
            )  # fmt: skip
        return cls(
            settings.kafka_bootstrap, name=name, policy=policy, registry=registry, factory=factory
        )

    # --- life cycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start connecting in the background; return at once."""
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise(), name=f"producer-{self.name}")

    async def connect(self) -> None:
        """Start the first producer now, raising the broker's error if it does not answer (for
        one-shot tools, which report it and exit), then supervise it as ``start`` does."""
        if self._producer is None and self._supervisor is None:
            producer = self._factory()
            try:
                await producer.start()
            except BaseException:
                await self._close(producer)
                raise
            self._installed(producer)
        await self.start()

    async def wait_ready(self, within: float | None = None) -> None:
        """Wait until a producer has started (``TimeoutError`` after ``within`` seconds)."""
        async with asyncio.timeout(within):
            await self.started.wait()

    async def stop(self) -> None:
        """Stop supervising, flush what is queued (bounded by ``close_timeout``), close."""
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        producer, self._producer = self._producer, None
        if producer is not None:
            await self._close(producer)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        self._fail_pending("the producer stopped")

    # --- sending ----------------------------------------------------------------------------

    async def send(
        self, topic: str, value: bytes, *, key: bytes | None = None, headers: Headers | None = None
    ) -> asyncio.Future[Any]:
        """Queue a message; return a future resolved with its acknowledgement (or failed).
        Raises ``ProducerUnavailable`` (nothing sent) while no producer runs."""
        producer = self._producer
        if producer is None:
            self._count_failure("unavailable")
            raise ProducerUnavailable(f"producer {self.name} is not connected")
        try:
            inner = await producer.send(topic, value, key=key, headers=headers)
        except KafkaError as exc:
            self._failed(producer, exc)
            raise
        if producer is not self._producer:  # replaced while queueing: it may never deliver
            self._count_failure("replaced")
            raise ProducerUnavailable("the producer was replaced")
        outer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[outer] = time.monotonic()
        inner.add_done_callback(lambda done: self._settled(producer, done, outer))
        return outer

    async def send_and_wait(
        self, topic: str, value: bytes, *, key: bytes | None = None, headers: Headers | None = None
    ) -> Any:
        """``send`` and wait for the acknowledgement (``RecordMetadata``)."""
        return await (await self.send(topic, value, key=key, headers=headers))

    def _settled(
        self, producer: InnerProducer, inner: asyncio.Future[Any], outer: asyncio.Future[Any]
    ) -> None:
        replaced = self._pending.pop(outer, None) is None  # failed already by a replacement
        if inner.cancelled():
            error: BaseException | None = ProducerUnavailable("the send was cancelled")
        else:
            error = inner.exception()
        if not replaced and producer is self._producer:
            if error is None:
                self._succeeded()
            else:
                self._failed(producer, error)
        if outer.done():
            return  # the caller gave up (its own timeout) or a replacement failed it
        if error is None:
            outer.set_result(inner.result())
        else:
            outer.set_exception(error)

    def _succeeded(self) -> None:
        self._last_success = time.monotonic()
        self._failures = 0
        self._trouble_since = None
        self._resets_in_a_row = 0

    def _failed(self, producer: InnerProducer, error: BaseException) -> None:
        reason = type(error).__name__
        self._count_failure(reason)
        if producer is not self._producer:
            return
        self._failures += 1
        if self._trouble_since is None:
            self._trouble_since = time.monotonic()
        if isinstance(error, FATAL_SEND_ERRORS) and self._fatal is None:
            self._fatal = reason
            self._wake.set()

    def _count_failure(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.send_failures.labels(self.name, reason).inc()

    def _fail_pending(self, why: str) -> None:
        pending, self._pending = self._pending, {}
        for outer in pending:
            if not outer.done():
                outer.set_exception(ProducerUnavailable(why))

    # --- health -----------------------------------------------------------------------------

    def seconds_since_success(self) -> float:
        return time.monotonic() - self._last_success

    def _troubled(self, now: float) -> bool:
        """The current producer failed a send, or has one waiting longer than ``reset_after``."""
        if self._failures:
            return True
        limit = now - self.policy.reset_after
        return any(sent <= limit for sent in self._pending.values())

    def _stalled(self, now: float) -> bool:
        since = max(self._last_success, self._started_at)
        return self._troubled(now) and now - since >= self.policy.reset_after

    @property
    def answering(self) -> bool:
        """The broker answered the last metadata probe."""
        return self._answering_since is not None

    @property
    def ready(self) -> bool:
        now = time.monotonic()
        return self._producer is not None and self.answering and not self._stalled(now)

    @property
    def healthy(self) -> bool:
        if self._supervisor is not None and self._supervisor.done():
            return False
        now = time.monotonic()
        return not (
            self._trouble_since is not None
            and now - self._trouble_since >= self.policy.wedged_after
            and self.answering
            and self._troubled(now)
        )

    # --- supervision ------------------------------------------------------------------------

    async def _supervise(self) -> None:
        try:
            if self._producer is None:
                await self._connect()
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.policy.probe_interval)
                self._wake.clear()
                reason = self._reset_reason()
                if reason is None:
                    await self._probe()
                    reason = self._reset_reason(probed=True)
                if reason is not None:
                    await self._replace(reason)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("producer_supervisor_crashed", producer=self.name)
            raise

    def _reset_reason(self, *, probed: bool = False) -> str | None:
        if self._fatal is not None:
            return self._fatal
        if self._producer is not None and _sender_died(self._producer):
            return "sender_died"
        if not probed or self._answering_since is None:
            return None
        now = time.monotonic()
        if self._stalled(now) and now - self._answering_since >= self.policy.answer_grace:
            return "stalled"
        return None

    async def _probe(self) -> None:
        producer = self._producer
        if producer is None:
            return
        try:
            async with asyncio.timeout(self.policy.probe_timeout):
                await ping(producer.client)
        except (KafkaError, OSError, TimeoutError):
            if self._answering_since is not None:
                log.warning("kafka_unreachable", producer=self.name, bootstrap=self.bootstrap)
            self._answering_since = None
        else:
            if self._answering_since is None:
                self._answering_since = time.monotonic()

    async def _replace(self, reason: str) -> None:
        """Close the current producer (in the background) and start a fresh one after the
        back-off. Sends waiting on the old one fail with ``ProducerUnavailable``."""
        old, self._producer = self._producer, None
        self._fatal = None
        log.warning("producer_reset", producer=self.name, reason=reason)
        if self.metrics is not None:
            self.metrics.resets.labels(self.name, reason).inc()
        self._fail_pending("the producer was replaced")
        if old is not None:
            task = asyncio.create_task(self._close(old))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        backoff = min(self.policy.backoff_max, self.policy.backoff_min * 2**self._resets_in_a_row)
        self._resets_in_a_row += 1
        await asyncio.sleep(backoff)
        await self._connect()

    async def _connect(self) -> None:
        """Start a producer, trying again every ``reconnect_interval`` until the broker answers."""
        while True:
            producer = self._factory()
            try:
                async with asyncio.timeout(self.policy.start_timeout):
                    await producer.start()
            except (KafkaError, OSError, TimeoutError) as exc:
                log.warning(
                    "kafka_unreachable", producer=self.name, bootstrap=self.bootstrap,
                    error=type(exc).__name__,
                )  # fmt: skip
                await self._close(producer)
                await asyncio.sleep(self.policy.reconnect_interval)
                continue
            self._installed(producer)
            return

    def _installed(self, producer: InnerProducer) -> None:
        self._started_at = time.monotonic()
        self._answering_since = self._started_at
        self._failures = 0
        self._fatal = None
        self._producer = producer
        self.started.set()
        log.info("kafka_connected", producer=self.name)

    async def _close(self, producer: InnerProducer) -> None:
        """Close ``producer``: flush what it holds, bounded by ``close_timeout``; past that, or
        when aiokafka fails while closing a producer that met a fatal error, drop it (its
        callers' futures are failed already, so nothing waits on it)."""
        try:
            async with asyncio.timeout(self.policy.close_timeout):
                await producer.stop()
        except TimeoutError:
            log.warning("producer_close_timed_out", producer=self.name)
            await _abandon(producer)
        except Exception as exc:  # aiokafka internals after a fatal error: nothing to save
            log.warning("producer_close_failed", producer=self.name, error=type(exc).__name__)
            await _abandon(producer)


def _sender_died(producer: InnerProducer) -> bool:
    """aiokafka's sender task ended (it raises out on ``OutOfOrderSequenceNumber`` and
    ``ProducerFenced``), or librdkafka reported a fatal error: the producer will not send
    again."""
    if isinstance(producer, RdkafkaProducer):
        return producer.fatal is not None
    task = _sender_task(producer)
    return task is not None and task.done()


def _sender_task(producer: InnerProducer) -> asyncio.Task[Any] | None:
    task = getattr(getattr(producer, "_sender", None), "sender_task", None)
    return task if isinstance(task, asyncio.Task) else None


async def _abandon(producer: InnerProducer) -> None:
    """Stop a producer's background sending and close its connections, whatever it holds."""
    task = _sender_task(producer)
    if task is not None and not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=1.0)  # its outcome is aiokafka's own business
    with contextlib.suppress(Exception):
        await producer.client.close()

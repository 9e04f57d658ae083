"""What every process role of this service shares: the ``Process`` protocol ``__main__`` runs,
its exit statuses, and the helpers each role uses to connect, close and report.

``start()`` waits for Kafka and never gives up until stopped, ``run()`` returns an exit status,
``stop()`` is graceful (hand back or finish in-flight work, commit, flush).

``checks()`` is readiness (``/readyz``): started, every consume loop running, the broker
answering, and whatever else the role needs to do its work. ``healthy()`` is liveness
(``/healthz``): False only when restarting the process is the cure — a consume loop ended on its
own, or a client is wedged beyond replacement (see ``hookbay_common.producer``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from hookbay_common.logs import get_logger
from hookbay_forwarder.metrics import ConsumerMetrics

log = get_logger("hookbay.forwarder")

EXIT_OK = 0
EXIT_CRASHED = 1
EXIT_DEAD_LETTER_LIMIT = 3
OBSERVE_INTERVAL = 2.0
MONGO_SOCKET_TIMEOUT_MS = 30_000
"""One MongoDB operation of the recorder (and the stats processor) waits at most this for its
answer: a FerretDB restarted under load once left a write unanswered, and the recorder, bound
only by its 300 s batch deadline, sat still for minutes with everything it had read. No single
upsert or look-up of theirs takes seconds; the batch is then written again (idempotent)."""
CLOSE_TIMEOUT = 10.0


class Process(Protocol):
    @property
    def metrics(self) -> ConsumerMetrics: ...

    def checks(self) -> dict[str, bool]: ...
    def healthy(self) -> bool: ...
    async def start(self) -> None: ...
    async def run(self) -> int: ...
    async def stop(self) -> None: ...
    def request_stop(self) -> None: ...


async def until_connected(attempt: Callable[[], Awaitable[Any]], stopping: asyncio.Event) -> bool:
    """Retry ``attempt`` until it succeeds (True) or a stop is requested (False)."""
    while not stopping.is_set():
        try:
            await attempt()
        except (KafkaError, OSError, TimeoutError) as exc:
            log.warning("kafka_unreachable", error=type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 2.0)
        else:
            return True
    return False


async def closed(closing: Awaitable[None], what: str) -> None:
    """Close a Kafka client, but never hang a shutdown on it: offsets are committed by then."""
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await closing
    except TimeoutError:
        log.warning("kafka_close_timed_out", client=what, seconds=CLOSE_TIMEOUT)
    except KafkaError as exc:
        log.warning("kafka_close_failed", client=what, error=type(exc).__name__)


def report_lag(
    metrics: ConsumerMetrics, name: str, _: AIOKafkaConsumer, lags: dict[Any, int]
) -> None:
    for tp, lag in lags.items():
        metrics.lag.labels(name, tp.topic, str(tp.partition)).set(lag)


def exit_status(results: Sequence[Any]) -> int:
    """``EXIT_CRASHED`` (logged) if any of the consume loops' ``results`` is an exception."""
    for result in results:
        if isinstance(result, BaseException):
            log.error("consumer_failed", error=type(result).__name__, detail=str(result)[:500])
            return EXIT_CRASHED
    return EXIT_OK

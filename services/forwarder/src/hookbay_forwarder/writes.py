"""Writing records durably: ``DurableWriter.write`` returns once Kafka acknowledged every one.

A retriable Kafka error (``is_retriable``: a leader or the broker away, a producer being
replaced) is retried with back-off, for as long as it takes, resending only what was not
acknowledged, so the work that produced the records is never done twice for it. Any other Kafka
error propagates: the consume loop stops (``HandlerCrashed``, exit 1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka.errors import KafkaError

from hookbay_common.logs import get_logger
from hookbay_common.producer import Headers, ResilientProducer, is_retriable
from hookbay_forwarder.metrics import ForwarderMetrics

log = get_logger("hookbay.forwarder")
WRITE_BACKOFF_MIN = 0.2
WRITE_BACKOFF_MAX = 5.0


@dataclass(frozen=True)
class Message:
    topic: str
    value: bytes
    key: bytes | None
    headers: Headers | None = None


@dataclass
class DurableWriter:
    producer: ResilientProducer
    metrics: ForwarderMetrics

    async def write(self, messages: Sequence[Message]) -> None:
        """Return once Kafka acknowledged every message; retry retriable errors with back-off
        (resending only the unacknowledged ones); raise any other ``KafkaError``."""
        waiting = list(messages)
        delay = WRITE_BACKOFF_MIN
        while True:
            failed, error = await self._send_all(waiting)
            if error is None:
                return
            if not is_retriable(error):
                raise error
            self.metrics.handler_retries.labels("forwarder", type(error).__name__).inc()
            log.warning(
                "write_retry", error=type(error).__name__, messages=len(failed), delay=delay
            )
            await asyncio.sleep(delay)
            delay = min(WRITE_BACKOFF_MAX, delay * 2)
            waiting = failed

    async def _send_all(self, messages: list[Message]) -> tuple[list[Message], KafkaError | None]:
        """Send every message; return those not acknowledged and the first error."""
        futures: list[asyncio.Future[object] | None] = []
        error: KafkaError | None = None
        for message in messages:
            try:
                futures.append(
                    await self.producer.send(
                        message.topic, message.value, key=message.key, headers=message.headers
                    )
                )
            except KafkaError as exc:
                futures.append(None)
                error = error or exc
        sent = [f for f in futures if f is not None]
        results = await asyncio.gather(*sent, return_exceptions=True)
        outcomes = iter(results)
        failed = []
        for message, future in zip(messages, futures, strict=True):
            outcome = next(outcomes) if future is not None else None
            if future is None or isinstance(outcome, BaseException):
                failed.append(message)
                if isinstance(outcome, KafkaError):
                    error = error or outcome
                elif isinstance(outcome, BaseException):
                    raise outcome
        return failed, error

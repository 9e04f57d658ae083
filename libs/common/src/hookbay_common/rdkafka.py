"""``RdkafkaProducer``: a Kafka producer over librdkafka (confluent-kafka), for
``ResilientProducer``.

aiokafka builds every produce request and parses every answer in Python; librdkafka does it in C,
on threads of its own, and batches what a millisecond brings (``linger.ms``). Measured on 2 cores
(docs/benchmarks.md, "Ingest"): 25-28 µs of CPU per acknowledged message with aiokafka, 7.5-9.6 µs
here, and the broker spends about half as much on the fewer, larger requests.

How it meets ``ResilientProducer``'s contract (``hookbay_common.producer``):

- ``send`` queues the message in librdkafka and returns a future resolved with its
  ``Delivered`` place once the broker acknowledged it (acks=all, idempotent), or failed with a
  ``KafkaError``. librdkafka reports deliveries to whoever calls ``poll``: a thread of this
  producer polls, gathers what one poll served, and hands it to the event loop in one
  ``call_soon_threadsafe``.
- librdkafka stops trying a message ``delivery_timeout`` seconds after ``send``
  (``ERR__MSG_TIMED_OUT``, retriable): ingest passes 90 % of its answer deadline, so a request
  answered 503 is not sent afterwards by a producer still retrying it. One already sent when the
  broker answers late may still be written after its 503 (at least once, as with any producer).
- After the broker went away, librdkafka tries to reconnect at least once a second
  (``RECONNECT_MAX_MS``), so the first events after its return are not kept waiting.
- An error librdkafka calls fatal (the idempotent producer lost its sequence or epoch) fails the
  send with ``RdkafkaFatal``, one of ``FATAL_SEND_ERRORS``: ``ResilientProducer`` replaces the
  producer. ``fatal`` says so for a fatal error reported outside any send.
- Keys go to partitions as Java's and aiokafka's default partitioner sends them (murmur2): an
  owner's events keep their partition, hence their order, whichever client wrote them.
- ``client`` is an aiokafka client of its own, for ``ResilientProducer``'s metadata probes
  (``kafka.ping``); ``start`` fails with the broker's error while no broker answers it.
- librdkafka's own log lines go to the process's JSON log (``kafka_client_log``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError
from confluent_kafka import KafkaError as RdError
from confluent_kafka import KafkaException, Producer

from hookbay_common.logs import get_logger
from hookbay_common.topics import MAX_MESSAGE_BYTES

log = get_logger("hookbay.producer")

LINGER_MS: Final = 1
"""How long librdkafka waits for more messages to send in one request: 1 ms took the CPU per
message from 24-31 µs (0 ms) to 7.5-9.6 µs, 32 senders awaiting acks=all (docs/benchmarks.md)."""
RECONNECT_MAX_MS: Final = 1000
"""librdkafka's longest wait between two connection attempts (its default is 10 s): a broker
back is tried again within a second."""
POLL_S: Final = 0.2
"""The poll thread's longest wait; it returns at once when a delivery is reported."""
FLUSH_S: Final = 10.0
"""``stop`` waits this long at most for what is still queued."""
PERMANENT: Final = frozenset({
    RdError.MSG_SIZE_TOO_LARGE, RdError._INVALID_TYPE, RdError.INVALID_RECORD,
    RdError.RECORD_LIST_TOO_LARGE, RdError.INVALID_REQUIRED_ACKS, RdError._INVALID_ARG,
    RdError.TOPIC_AUTHORIZATION_FAILED, RdError.CLUSTER_AUTHORIZATION_FAILED,
    RdError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, RdError.INVALID_CONFIG,
})  # fmt: skip
"""Errors sending again will not cure; every other one is retriable (a broker, a leader or the
network away; a message timed out)."""


class _RdkafkaError(KafkaError):  # type: ignore[misc]
    """librdkafka's ``error`` as a ``KafkaError``: its name and text, and its ``code``."""

    def __init__(self, error: RdError) -> None:
        super().__init__(f"{error.name()}: {error.str()}")
        self.code = error.code()


class RdkafkaSendError(_RdkafkaError):
    """A message librdkafka did not deliver; ``retriable`` unless the error is one of
    ``PERMANENT``."""

    def __init__(self, error: RdError) -> None:
        super().__init__(error)
        self.retriable = self.code not in PERMANENT


class RdkafkaFatal(_RdkafkaError):
    """librdkafka's fatal error: this producer never sends again (``ResilientProducer`` replaces
    it, which makes it retriable there)."""


def send_error(error: RdError) -> KafkaError:
    """The ``KafkaError`` a send fails with for librdkafka's ``error``."""
    fatal = error.fatal() or error.code() == RdError._FATAL
    return RdkafkaFatal(error) if fatal else RdkafkaSendError(error)


@dataclass(frozen=True, slots=True)
class Delivered:
    """Where the broker wrote an acknowledged message."""

    topic: str
    partition: int
    offset: int


class _LogLines:
    """librdkafka's log lines (served by ``poll``), as JSON log events of this process."""

    def log(self, level: int, fmt: str, *args: Any) -> None:
        if level >= logging.WARNING:
            log.warning("kafka_client_log", line=fmt % args if args else fmt)


class RdkafkaProducer:
    """An idempotent (acks=all) librdkafka producer behind ``InnerProducer``'s interface; see
    the module docstring. One event loop: the one ``start`` runs in."""

    def __init__(
        self, bootstrap: str, *, client_id: str = "hookbay", delivery_timeout: float = 10.0
    ) -> None:
        self.client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id=f"{client_id}-probe")
        self.fatal: KafkaError | None = None
        """Set when librdkafka reported a fatal error: the producer will not send again."""
        self._config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": LINGER_MS,
            "partitioner": "murmur2_random",
            "message.max.bytes": MAX_MESSAGE_BYTES,
            "message.timeout.ms": max(1, int(delivery_timeout * 1000)),
            "reconnect.backoff.max.ms": RECONNECT_MAX_MS,
            "error_cb": self._error,
            "logger": _LogLines(),
        }
        self._producer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reports: list[tuple[asyncio.Future[Any], RdError | None, Any]] = []
        self._polling = threading.Event()
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        """Reach the broker (the error when none answers), then start producing."""
        await self.client.bootstrap()
        self._loop = asyncio.get_running_loop()
        self._producer = Producer(self._config)
        self._polling.set()
        self._thread = threading.Thread(
            target=self._poll_loop, name=f"rdkafka-poll-{self._config['client.id']}", daemon=True
        )
        self._thread.start()

    async def stop(self) -> None:
        """Deliver what is queued (``FLUSH_S`` at most), then close. Sends still undelivered are
        not resolved here: their caller's deadline or ``ResilientProducer`` fails them."""
        loop = asyncio.get_running_loop()
        if self._thread is not None:
            self._polling.clear()
            await loop.run_in_executor(None, self._thread.join)
            self._thread = None
        if self._producer is not None:
            await loop.run_in_executor(None, self._producer.flush, FLUSH_S)
            self._hand_over()
        await self.client.close()

    async def send(
        self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[Any]:  # fmt: skip
        """Queue a message; the future is resolved with its ``Delivered`` place or failed with
        a ``KafkaError``. Raises a ``KafkaError`` when librdkafka refuses it (nothing queued)."""
        assert self._loop is not None, "not started"
        future = self._loop.create_future()
        try:
            self._producer.produce(
                topic, value, key, headers=headers, on_delivery=partial(self._delivered, future)
            )
        except KafkaException as exc:
            raise send_error(exc.args[0]) from None
        except BufferError:  # the local queue is full (``queue.buffering.max.*``)
            raise RdkafkaSendError(RdError(RdError._QUEUE_FULL)) from None
        return future

    # --- the poll thread --------------------------------------------------------------------

    def _poll_loop(self) -> None:
        while self._polling.is_set():
            self._producer.poll(POLL_S)
            self._hand_over()

    def _delivered(self, future: asyncio.Future[Any], error: RdError | None, message: Any) -> None:
        self._reports.append((future, error, message))

    def _hand_over(self) -> None:
        """Give the reports gathered so far to the event loop, in one call."""
        if not self._reports:
            return
        reports, self._reports = self._reports, []
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(_settle, reports)

    def _error(self, error: RdError) -> None:
        """librdkafka's error callback (served by ``poll``): a fatal error ends this producer;
        the others (a broker away, a connection reset) librdkafka recovers from by itself."""
        if error.fatal():
            self.fatal = RdkafkaFatal(error)
            log.error("kafka_producer_fatal", error=error.name())
        else:
            log.info("kafka_client_error", error=error.name())


def _settle(reports: list[tuple[asyncio.Future[Any], RdError | None, Any]]) -> None:
    for future, error, message in reports:
        if future.done():
            continue
        if error is None:
            future.set_result(Delivered(message.topic(), message.partition(), message.offset()))
        else:
            future.set_exception(send_error(error))

"""How the forwarder's consume loops ask the broker for records: eagerly while quiet, in batches
while busy.

Kafka's default fetch (answer at the first byte, else after 500 ms) suits a quiet consumer: a
lone record is read the moment it is written, and an idle consumer asks twice a second. A busy
consumer read that way takes its records a few per fetch, as they are written one by one, and
the fetches become a large part of the process's time. So ``FetchPace`` counts the records a
loop reads each second and, from ``BUSY_PER_S`` a second, asks the broker to answer once 32 KiB
are there or 20 ms have passed (``BATCH``); below it, the default again (``EAGER``). The
deliveries feed and the recorder pace themselves this way; the stats processor, whose counts are
written once a second anyway, always fetches in bulk (``BULK``, ``fetch_in``). The forward-URL
path's events consumer reads eagerly whatever the rate: it keeps its delivery latency
(``docs/decisions.md``).

Measured on 2 cores (``scripts/bench_lanes.py``): one destination ~620 → ~1,000 deliveries/s
batched; an idle forwarder batching all the time spent ~25 ms more CPU a second on its fetches
(``docs/decisions.md``, "Consume loops fetch in batches while busy").

aiokafka reads the fetch parameters from its fetcher for every request but has no public way to
change them after start; ``fetch_in`` sets the two attributes, and when they are not there (an
aiokafka that renamed them) it leaves the consumer's own settings and says so once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from hookbay_common.logs import get_logger

log = get_logger("hookbay.consumer")

Mode = tuple[int, int]
"""(``fetch_min_bytes``, ``fetch_max_wait_ms``)."""
EAGER: Final[Mode] = (1, 500)
BATCH: Final[Mode] = (32 * 1024, 20)
BULK: Final[Mode] = (64 * 1024, 1500)
"""The stats processor's fetches: 64 KiB or 1.5 s (faust's own wait, so an idle processor asks
no more often than before)."""
BUSY_PER_S: Final = 200
"""Records read a second from which a loop fetches in batches."""
_ATTRIBUTES: Final = ("_fetch_min_bytes", "_fetch_max_wait_ms")


class FetchPace:
    def __init__(
        self, consumer: Any, *, clock: Callable[[], float] = time.monotonic,
        busy_per_s: float = BUSY_PER_S,
    ) -> None:  # fmt: skip
        self._consumer = consumer
        self._clock = clock
        self._busy_per_s = busy_per_s
        self._since = clock()
        self._read = 0
        self.mode = EAGER

    def observe(self, records: int) -> None:
        """The loop read ``records``; once a second, choose the mode for the next fetches."""
        self._read += records
        now = self._clock()
        elapsed = now - self._since
        if elapsed < 1.0:
            return
        mode = BATCH if self._read / elapsed >= self._busy_per_s else EAGER
        self._since, self._read = now, 0
        if mode != self.mode and fetch_in(self._consumer, mode):
            self.mode = mode


_unavailable_said = False


def fetch_in(consumer: Any, mode: Mode) -> bool:
    """Have a started aiokafka consumer fetch in ``mode`` from its next request; False when it
    has no fetcher yet, or one without the two parameters (nothing is changed then; said once
    a process, as every consumer of the process has the same aiokafka)."""
    global _unavailable_said
    fetcher = _pacable_fetcher(consumer)
    if fetcher is None:
        if getattr(consumer, "_fetcher", None) is not None and not _unavailable_said:
            _unavailable_said = True
            log.warning("fetch_pace_unavailable", reason="the consumer's fetcher has no "
                        "fetch parameters to set; fetching with its own settings")  # fmt: skip
        return False
    for name, value in zip(_ATTRIBUTES, mode, strict=True):
        setattr(fetcher, name, value)
    return True


def fetch_mode(consumer: Any) -> Mode | None:
    """The mode a consumer fetches in (``None``: no fetcher yet, or one without them)."""
    fetcher = _pacable_fetcher(consumer)
    if fetcher is None:
        return None
    min_bytes, max_wait_ms = (getattr(fetcher, name) for name in _ATTRIBUTES)
    return min_bytes, max_wait_ms


def _pacable_fetcher(consumer: Any) -> Any:
    """The consumer's fetcher when it has the two fetch parameters, else ``None``."""
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None or not all(hasattr(fetcher, name) for name in _ATTRIBUTES):
        return None
    return fetcher

"""How the deliveries consumer asks the broker for tasks: eagerly while quiet, in batches while
busy.

Kafka's default fetch (answer at the first byte, else after 500 ms) suits a quiet lane: a lone
task is read the moment it is written, and an idle consumer asks twice a second. A busy lane
read that way takes its tasks one fetch each, as the router writes them one by one, and the
fetches become a third of the process's time. So ``FetchPace`` counts the tasks the feed reads
each second and, from ``BUSY_PER_S`` a second, asks the broker to answer once 32 KiB are there or
20 ms have passed (``BATCH``); below it, the default again (``EAGER``). Measured on 2 cores
(``scripts/bench_lanes.py``): one destination ~620 → ~1,000 deliveries/s batched; an idle
forwarder batching all the time spent ~25 ms more CPU a second on its fetches
(``docs/decisions.md``, "Lane fetches batch while busy").

aiokafka reads the fetch parameters from its fetcher for every request but has no public way to
change them after start; ``FetchPace`` sets the two attributes, and when they are not there (an
aiokafka that renamed them) it leaves the consumer's own settings and says so once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from hookbay_common.logs import get_logger

log = get_logger("hookbay.lanes")

Mode = tuple[int, int]
"""(``fetch_min_bytes``, ``fetch_max_wait_ms``)."""
EAGER: Final[Mode] = (1, 500)
BATCH: Final[Mode] = (32 * 1024, 20)
BUSY_PER_S: Final = 200
"""Tasks read a second from which the feed fetches in batches."""
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
        self._warned = False

    def observe(self, tasks: int) -> None:
        """The feed read ``tasks`` records; once a second, choose the mode for the next one."""
        self._read += tasks
        now = self._clock()
        elapsed = now - self._since
        if elapsed < 1.0:
            return
        mode = BATCH if self._read / elapsed >= self._busy_per_s else EAGER
        self._since, self._read = now, 0
        if mode != self.mode and self._apply(mode):
            self.mode = mode

    def _apply(self, mode: Mode) -> bool:
        fetcher = getattr(self._consumer, "_fetcher", None)
        if fetcher is None or not all(hasattr(fetcher, name) for name in _ATTRIBUTES):
            if not self._warned and fetcher is not None:
                self._warned = True
                log.warning("fetch_pace_unavailable", reason="the consumer's fetcher has no "
                            "fetch parameters to set; fetching with its own settings")  # fmt: skip
            return False
        for name, value in zip(_ATTRIBUTES, mode, strict=True):
            setattr(fetcher, name, value)
        return True

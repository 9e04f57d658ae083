"""The dead-letter limit: stop when failures look like our own fault rather than destinations'.

Destinations fail one at a time (a bad URL, an outage at one company); a bad deploy of hookbay
(a bug, a broken CA bundle, blocked egress) fails everything, everywhere, at once. Two rules:

- **spread**: of the last ``window`` chains that ended, at least ``ratio`` were dead-lettered,
  and those dead letters went to at least ``min_hosts`` distinct hosts;
- **invalid**: ``max_invalid`` messages in a row could not be read or crashed their handler.

When either trips, the forwarder stops without committing the message that tripped it, so
nothing more is dead-lettered until someone looks (thresholds in docs/operators/configuration.md).
"""

from __future__ import annotations

from collections import Counter, deque


class DeadLetterLimitExceeded(RuntimeError):
    """Raised by the handler that tripped the limit; the process exits with status 3."""


class DeadLetterLimit:
    def __init__(self, *, window: int, ratio: float, min_hosts: int, max_invalid: int) -> None:
        self._window = window
        self._ratio = ratio
        self._min_hosts = min_hosts
        self._max_invalid = max_invalid
        self._outcomes: deque[str | None] = deque(maxlen=window)  # host if dead-lettered
        self._dead_hosts: Counter[str] = Counter()
        self._invalid_in_a_row = 0

    def chain_ended(self, *, dead_letter_host: str | None) -> None:
        """Record a chain that ended: ``dead_letter_host`` is its host when dead-lettered."""
        if len(self._outcomes) == self._window:
            dropped = self._outcomes[0]
            if dropped is not None:
                self._dead_hosts[dropped] -= 1
                if not self._dead_hosts[dropped]:
                    del self._dead_hosts[dropped]
        self._outcomes.append(dead_letter_host)
        if dead_letter_host is not None:
            self._dead_hosts[dead_letter_host] += 1
        self._invalid_in_a_row = 0
        dead = sum(self._dead_hosts.values())
        if (
            len(self._outcomes) == self._window
            and dead >= self._ratio * self._window
            and len(self._dead_hosts) >= self._min_hosts
        ):
            raise DeadLetterLimitExceeded(
                f"{dead} of the last {self._window} deliveries were dead-lettered, across "
                f"{len(self._dead_hosts)} destination hosts: this looks like a fault of hookbay "
                "or its network, not of the destinations"
            )

    def invalid(self) -> None:
        """Record a message that could not be read or crashed its handler."""
        self._invalid_in_a_row += 1
        if self._invalid_in_a_row >= self._max_invalid:
            raise DeadLetterLimitExceeded(
                f"{self._invalid_in_a_row} messages in a row could not be read or crashed "
                "their handler"
            )

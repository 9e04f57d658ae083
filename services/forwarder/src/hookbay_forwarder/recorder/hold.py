"""Keeping an event back until its first attempt is read, so both are stored in one write.

The forwarder delivers an event milliseconds after ingest wrote it, and the recorder reads the
event and, a little later, its first attempt (or, routed, its delivery records). Written as they
come, the event is inserted ``pending`` and then updated to the attempt's status: on FerretDB a
look-up and a rewrite of the head, a transaction of its own, for nearly every event. Kept back
until that record is read (``HOOKBAY_RECORDER_HOLD`` seconds at most), the event is inserted
with its status and nothing is updated.

    hold = EventHold(0.5)
    ready = hold.sort(reads, now)      # what to write now: in reads order, held events first
    hold.first_offsets()               # per partition, the first record still held (commit below)
    hold.release()                     # everything held (stopping)

Only deliverable events are held (``Event.deliverable``): a rejected event, a handshake or an
event with nothing to deliver gets no attempt. An event whose attempt was read first is not
held (the attempt wrote its status stub already). The recorder never commits past a held
record, so a crash reads it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from hookbay_common.models import Attempt, Delivery, Event

MAX_HELD: Final = 2000
"""Events held at most; past it, the oldest are written without waiting (a forwarder that is
down or far behind must not make the recorder hold a backlog)."""
ANSWERED_KEPT: Final = 4096
"""Event ids of attempts and delivery records remembered, for an event read after its attempt."""


@dataclass(slots=True)
class Read:
    """A consumed record and what it decoded to (``None``: unreadable, logged and skipped)."""

    record: Any
    item: Event | Attempt | Delivery | None


class EventHold:
    """Holds deliverable events until a record of their delivery is read, ``hold_s`` seconds at
    most (0: never). Not thread-safe; the recorder's loop owns it."""

    def __init__(self, hold_s: float, *, limit: int = MAX_HELD) -> None:
        self._hold_s = hold_s
        self._limit = limit
        self._held: dict[str, tuple[float, Read]] = {}
        """Held events by id, oldest first, with the time each is due."""
        self._answered: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._held)

    def sort(self, reads: Sequence[Read], now: float) -> list[Read]:
        """What to write now of ``reads`` and of the events held before: the held events whose
        attempt came, whose time ran out or that exceed the limit, then ``reads`` without the
        deliverable events to hold."""
        if self._hold_s <= 0 and not self._held:
            return list(reads)
        for read in reads:
            if isinstance(read.item, Attempt | Delivery):
                self._answer(read.item.event_id)
        ready: list[Read] = []
        for event_id, (due, read) in list(self._held.items()):
            if due <= now or event_id in self._answered or len(self._held) > self._limit:
                del self._held[event_id]
                ready.append(read)
        for read in reads:
            item = read.item
            if (
                isinstance(item, Event)
                and self._hold_s > 0
                and item.deliverable
                and item.id not in self._answered
            ):
                self._held.pop(item.id, None)  # the same event read again: the later copy
                self._held[item.id] = (now + self._hold_s, read)
            else:
                ready.append(read)
        while len(self._held) > self._limit:
            ready.append(self._held.pop(next(iter(self._held)))[1])
        return ready

    def _answer(self, event_id: str) -> None:
        self._answered[event_id] = None
        if len(self._answered) > ANSWERED_KEPT:
            del self._answered[next(iter(self._answered))]

    def due_in(self, now: float) -> float | None:
        """Seconds until the first held event is due (``None``: none held)."""
        if not self._held:
            return None
        due, _ = next(iter(self._held.values()))  # held in the order they are due
        return max(0.0, due - now)

    def first_offsets(self) -> dict[tuple[str, int], int]:
        """The offset of the first record held, by (topic, partition)."""
        first: dict[tuple[str, int], int] = {}
        for _, read in self._held.values():
            key = (read.record.topic, read.record.partition)
            first[key] = min(first.get(key, read.record.offset), read.record.offset)
        return first

    def release(self) -> list[Read]:
        """Every held event, oldest first; none held after."""
        ready = [read for _, read in self._held.values()]
        self._held.clear()
        return ready

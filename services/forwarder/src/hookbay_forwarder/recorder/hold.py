"""Keeping an event back until its first attempt is read, so both are stored in one write.

The forwarder delivers an event milliseconds after ingest wrote it, and the recorder reads the
event and, a little later, its first attempt (routed: the router's ``scheduled`` delivery
record, then the attempt). Written as they come, the event is inserted ``pending`` and then
updated to each record's status: on FerretDB a look-up and a rewrite of the head, a transaction
of its own, for nearly every event. Kept back until its first attempt is read (at most until
``HOOKBAY_RECORDER_HOLD`` seconds after ingest accepted it), the event is inserted with its
status and its delivery records, and nothing is updated.

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

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from hookbay_common.models import Attempt, Delivery, DeliveryStatus, Event

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
    """Holds deliverable events until a record settling them is read (an attempt, or a
    delivery record past ``scheduled`` and ``delivering``), until ``hold_s`` seconds after
    ingest accepted them at most (``created_at`` against ``wall``; 0: never), so the hold never
    takes an event past the time it must be listed by. The delivery records of a held event
    that settle nothing yet (the router's ``scheduled``) are held with it and written with it.
    Not thread-safe; the recorder's loop owns it."""

    def __init__(
        self, hold_s: float, *, limit: int = MAX_HELD, wall: Callable[[], float] = time.time
    ) -> None:
        self._hold_s = hold_s
        self._limit = limit
        self._wall = wall
        self._held: dict[str, tuple[float, list[Read]]] = {}
        """By event id, in the order read: when it is due (the caller's clock), the event and
        its delivery records."""
        self._answered: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._held)

    def sort(self, reads: Sequence[Read], now: float) -> list[Read]:
        """What to write now of ``reads`` and of what was held before: the held events that
        are settled, due or past the limit (each with its held records), then ``reads``
        without the deliverable events to hold and the delivery records held with them."""
        if self._hold_s <= 0 and not self._held:
            return list(reads)
        for read in reads:
            if (settled := _settled(read.item)) is not None:
                self._answer(settled)
        ready: list[Read] = []
        for event_id, (due, held) in list(self._held.items()):
            if due <= now or event_id in self._answered:
                del self._held[event_id]
                ready += held
        rest: list[Read] = []
        for read in reads:
            item = read.item
            if isinstance(item, Event) and item.id in self._held:  # read again: kept with it
                self._held[item.id][1].append(read)
            elif (
                isinstance(item, Event)
                and item.deliverable
                and item.id not in self._answered
                and (left := self._left(item)) > 0
            ):
                self._held[item.id] = (now + left, [read])
            else:
                rest.append(read)
        for read in rest:  # after the events: a delivery record may come before its event
            item = read.item
            if isinstance(item, Delivery) and item.event_id in self._held:  # not settling
                self._held[item.event_id][1].append(read)
            else:
                ready.append(read)
        while len(self._held) > self._limit:
            ready += self._held.pop(next(iter(self._held)))[1]
        return ready

    def _left(self, event: Event) -> float:
        """How much longer ``event`` may wait: until ``hold_s`` after it was accepted, never
        more than ``hold_s`` from now (a clock behind ingest's)."""
        accepted = event.created_at.timestamp()
        return min(self._hold_s, accepted + self._hold_s - self._wall())

    def _answer(self, event_id: str) -> None:
        self._answered[event_id] = None
        if len(self._answered) > ANSWERED_KEPT:
            del self._answered[next(iter(self._answered))]

    def due_in(self, now: float) -> float | None:
        """Seconds until the first held event is due (``None``: none held)."""
        if not self._held:
            return None
        return max(0.0, min(due for due, _ in self._held.values()) - now)

    def first_offsets(self) -> dict[tuple[str, int], int]:
        """The offset of the first record held, by (topic, partition)."""
        first: dict[tuple[str, int], int] = {}
        for _, held in self._held.values():
            for read in held:
                key, offset = (read.record.topic, read.record.partition), read.record.offset
                first[key] = min(first.get(key, offset), offset)
        return first

    def release(self) -> list[Read]:
        """Every held record, oldest event first; none held after."""
        ready = [read for _, held in self._held.values() for read in held]
        self._held.clear()
        return ready


def _settled(item: object) -> str | None:
    """The id of the event ``item`` settles: an attempt's, or a delivery record's that is not
    the router's or the lanes' promise (``None``: it settles none)."""
    if isinstance(item, Attempt) or (isinstance(item, Delivery) and item.status not in _PROMISES):
        return item.event_id
    return None


_PROMISES: Final = frozenset({DeliveryStatus.SCHEDULED, DeliveryStatus.DELIVERING})

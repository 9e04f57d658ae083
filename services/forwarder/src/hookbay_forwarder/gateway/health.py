"""Destination health outside the lanes: what a breaker's transitions change in the store, and
what the store says of breakers this process did not move itself.

**Transitions → the destination's state.** The lanes report every transition synchronously
(``transitioned``); one writer task applies them in order through ``DestinationStates`` (the
code path of the owner's pause and resume: a MongoDB write, then the change log):

- opened, reopened ⇒ ``paused`` / ``breaker`` with the breaker's ``state``, ``opened_at`` and
  ``next_probe_at``;
- closed ⇒ ``active``;
- disabled ⇒ ``disabled`` / ``gone`` or ``sustained_failure``;
- probing changes nothing stored.

When an ``IssueTracker`` is given, the same transitions open and resolve the owner's issues
once the state is written: opened ⇒ an occurrence of the destination's ``delivery`` issue
(reason ``breaker``; a reopening counts on it), disabled ⇒ one of its ``disabled`` issue
(reason ``gone`` / ``sustained_failure``), closed ⇒ its ``delivery`` issue resolved. An
occurrence names the event of the attempt that caused it (``Transition.event_id``) as the
issue's ``sample_event_id``. The tracker
sends one notification per issue transition to the owner's channels (``Notifier``), never one
per failed attempt. The owner's resume of a destination whose breaker was open here resolves
both (the problem is the owner's to judge now; a breaker that opens again reopens them).

A write that fails (the store away) is tried again after a back-off, ``WRITE_TRIES`` times in
all, then given up and logged: the lane holds or drains by its breaker whatever the store says,
and the next transition writes the state again. The state and the issue are tried apart, so a
failing issue write never writes the state twice.

**The change log → breakers** (``changed``): a destination whose change was not written by
this process (its owner's, or another replica's): ``active`` resets its breaker (the owner
resumed or re-enabled it); ``paused`` / ``breaker`` opens a closed breaker as stored
(``Lanes.restore_breaker``: after a restart or a rebalance the new owner of the destination
probes when the old one would have). A change this process wrote itself, or one that arrives
while a write of its destination is under way here, is its own echo and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from hookbay_common.alerts import IssueTracker
from hookbay_common.destination_state import DestinationStates, held_by_breaker
from hookbay_common.errors import DestinationNotFound
from hookbay_common.logs import get_logger
from hookbay_common.models import (
    BreakerState,
    Destination,
    DestinationState,
    IssueType,
    StateReason,
)
from hookbay_forwarder.gateway.breaker import Transition, TransitionKind
from hookbay_forwarder.gateway.clock import Clock, SystemClock
from hookbay_forwarder.gateway.deliver import DestinationLookup

log = get_logger("hookbay.forwarder.health")

WRITE_TRIES: Final = 5
WRITE_BACKOFF: Final = (1.0, 5.0, 15.0, 60.0)


class BreakerControl(Protocol):
    """``Lanes``' side of it."""

    def reset_breaker(self, destination: str) -> bool: ...

    def restore_breaker(
        self, destination: str, opened_at: datetime, next_probe_at: datetime | None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class _Resumed:
    """The owner resumed a destination whose breaker was open here."""

    destination: str


class DestinationHealth:
    def __init__(
        self,
        view: DestinationLookup,
        states: DestinationStates,
        *,
        issues: IssueTracker | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._view = view
        self._states = states
        self._issues = issues
        self._clock = clock or SystemClock()
        self._queue: asyncio.Queue[Transition | _Resumed] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._pending: dict[str, int] = {}
        self._written: dict[str, datetime] = {}

    # --- transitions → the store --------------------------------------------------------------

    def transitioned(self, transition: Transition) -> None:
        """A breaker's transition (the lanes' ``on_transition``): written in the background."""
        if transition.kind is TransitionKind.PROBING:
            return
        destination = transition.destination
        self._pending[destination] = self._pending.get(destination, 0) + 1
        self._enqueue(transition)

    def _enqueue(self, item: Transition | _Resumed) -> None:
        self._queue.put_nowait(item)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_loop(), name="destination-health")

    async def idle(self) -> None:
        """Every transition reported so far is written (or given up)."""
        await self._queue.join()

    async def close(self, grace: float) -> None:
        if self._writer is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), grace)
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._writer

    async def _write_loop(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if isinstance(item, Transition):
                    await self._apply(item)
                else:
                    await self._resumed(item.destination)
            finally:
                if isinstance(item, Transition):
                    left = self._pending.get(item.destination, 1) - 1
                    if left > 0:
                        self._pending[item.destination] = left
                    else:
                        self._pending.pop(item.destination, None)
                self._queue.task_done()

    async def _apply(self, transition: Transition) -> None:
        destination = self._view.destination_by_id(transition.destination)
        if destination is None:
            return  # deleted meanwhile

        async def store() -> None:
            stored = await self._store(destination, transition)
            if stored is not None:
                self._written[destination.id] = stored.updated_at

        kind = transition.kind.value
        if await self._tried("state", destination.id, kind, store):
            await self._tried("issue", destination.id, kind,
                              lambda: self._tell(destination, transition))  # fmt: skip

    async def _resumed(self, destination_id: str) -> None:
        destination = self._view.destination_by_id(destination_id)
        if destination is None or self._issues is None:
            return
        issues = self._issues

        async def resolve() -> None:
            for type_ in (IssueType.DELIVERY, IssueType.DISABLED):
                await issues.clear(destination.username, type_, destination=destination.name)

        await self._tried("issue", destination_id, "resumed", resolve)

    async def _tried(
        self, what: str, destination: str, kind: str, operation: Callable[[], Awaitable[None]]
    ) -> bool:
        """``operation()``, again after a back-off while it fails, ``WRITE_TRIES`` times in
        all; false when the destination was deleted meanwhile (nothing more to do)."""
        for attempt in range(WRITE_TRIES):
            try:
                await operation()
                return True
            except DestinationNotFound:
                return False
            except Exception as exc:  # the store away: again after a while
                log.warning(
                    "destination_health_unwritten", what=what, destination=destination,
                    kind=kind, attempt=attempt + 1, error=type(exc).__name__,
                )  # fmt: skip
                if attempt < len(WRITE_BACKOFF):
                    await self._clock.sleep(WRITE_BACKOFF[attempt])
        log.error("destination_health_abandoned", what=what, destination=destination,
                  kind=kind)  # fmt: skip
        return True

    async def _store(self, destination: Destination, transition: Transition) -> Destination | None:
        username, name = destination.username, destination.name
        kind = transition.kind
        if kind in (TransitionKind.OPENED, TransitionKind.REOPENED):
            return await self._states.breaker_opened(
                username, name, state=BreakerState(transition.state.value),
                opened_at=transition.opened_at, next_probe_at=transition.next_probe_at,
            )  # fmt: skip
        if kind is TransitionKind.CLOSED:
            return await self._states.breaker_closed(username, name)
        if kind is TransitionKind.DISABLED:
            reason = StateReason(transition.reason or StateReason.SUSTAINED_FAILURE.value)
            return await self._states.disabled(
                username, name, reason, opened_at=transition.opened_at
            )
        return None

    async def _tell(self, destination: Destination, transition: Transition) -> None:
        if self._issues is None:
            return
        username, name = destination.username, destination.name
        kind = transition.kind
        if kind in (TransitionKind.OPENED, TransitionKind.REOPENED):
            await self._issues.occurred(
                username, IssueType.DELIVERY, destination=name, reason="breaker",
                event_id=transition.event_id,
            )  # fmt: skip
        elif kind is TransitionKind.DISABLED:
            await self._issues.occurred(
                username, IssueType.DISABLED, destination=name, reason=transition.reason,
                event_id=transition.event_id,
            )  # fmt: skip
        elif kind is TransitionKind.CLOSED:
            await self._issues.clear(username, IssueType.DELIVERY, destination=name)

    # --- the change log → breakers ------------------------------------------------------------

    def changed(self, destination: Destination, lanes: BreakerControl) -> None:
        """A destination entered or changed in the routing view (``on_destination``)."""
        if self._own(destination):
            return
        if destination.state is DestinationState.ACTIVE:
            if lanes.reset_breaker(destination.id):
                self._enqueue(_Resumed(destination.id))
        elif held_by_breaker(destination) and destination.breaker.opened_at is not None:
            lanes.restore_breaker(
                destination.id, destination.breaker.opened_at, destination.breaker.next_probe_at
            )

    def _own(self, destination: Destination) -> bool:
        if self._pending.get(destination.id):
            return True
        written = self._written.get(destination.id)
        return written is not None and destination.updated_at <= written

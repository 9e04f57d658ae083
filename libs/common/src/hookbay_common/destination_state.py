"""A destination's state (``active``, ``paused``, ``disabled`` and why), written by its owner
(pause, resume) and by the deliverer (its circuit breaker), one code path for both.

Every change is a MongoDB write that moves ``updated_at`` followed by a publication to the
configuration change log (``hookbay_common.configlog``), so every forwarder replica's routing
view learns it the way it learns any change. Each change reads the destination first and
decides from what it holds (as the owner's pause always did; the store has no atomic
compare-and-set on FerretDB v1): the deliverer never overrides its owner, so a destination its
owner paused stays paused whatever the breaker says, and only the owner's resume makes a
destination hookbay disabled ``active`` again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from hookbay_common.configlog import ConfigPublisher
from hookbay_common.models import BreakerState, Destination, DestinationState, StateReason

_CLOSED_BREAKER: dict[str, Any] = {
    "breaker.state": BreakerState.CLOSED.value,
    "breaker.opened_at": None,
    "breaker.next_probe_at": None,
}


class DestinationStore(Protocol):
    """``hookbay_common.db.DestinationRepository``'s part this uses."""

    async def require(self, username: str, name: str) -> Destination: ...

    async def update(self, username: str, name: str, changes: dict[str, Any]) -> Destination: ...


def held_by_breaker(destination: Destination) -> bool:
    return (
        destination.state is DestinationState.PAUSED
        and destination.state_reason is StateReason.BREAKER
    )


class DestinationStates:
    """Writes a destination's state, then publishes it (when a ``publisher`` is given). Each
    method returns the destination as stored afterwards, unchanged when there was nothing to
    do."""

    def __init__(
        self, destinations: DestinationStore, publisher: ConfigPublisher | None = None
    ) -> None:
        self._destinations = destinations
        self._publisher = publisher

    # --- the owner's -------------------------------------------------------------------------

    async def pause(self, username: str, name: str) -> Destination:
        """Hold its deliveries until resumed: ``paused`` / ``manual``. A disabled destination
        stays disabled (it holds already, and keeps the reason hookbay disabled it); one the
        breaker paused becomes the owner's pause (the owner's resume ends it)."""
        current = await self._destinations.require(username, name)
        if current.state is DestinationState.DISABLED or (
            current.state is DestinationState.PAUSED and current.state_reason is StateReason.MANUAL
        ):
            return current
        changes = {"state": DestinationState.PAUSED, "state_reason": StateReason.MANUAL}
        return await self._write(username, name, changes)

    async def resume(self, username: str, name: str) -> Destination:
        """``active`` again, whatever paused or disabled it, with its breaker closed; held
        deliveries go out."""
        current = await self._destinations.require(username, name)
        if current.state is DestinationState.ACTIVE:
            return current
        changes = {"state": DestinationState.ACTIVE, "state_reason": None, **_CLOSED_BREAKER}
        return await self._write(username, name, changes)

    # --- the breaker's -----------------------------------------------------------------------

    async def breaker_opened(
        self,
        username: str,
        name: str,
        *,
        state: BreakerState,
        opened_at: datetime | None,
        next_probe_at: datetime | None,
    ) -> Destination:
        """The breaker opened (or a probe failed): an ``active`` destination becomes
        ``paused`` / ``breaker``; the breaker's ``state``, ``opened_at`` and ``next_probe_at``
        are written either way, unless its owner paused it or hookbay disabled it."""
        current = await self._destinations.require(username, name)
        if current.state is not DestinationState.ACTIVE and not held_by_breaker(current):
            return current
        changes = {
            "state": DestinationState.PAUSED, "state_reason": StateReason.BREAKER,
            "breaker.state": state.value, "breaker.opened_at": opened_at,
            "breaker.next_probe_at": next_probe_at,
        }  # fmt: skip
        return await self._write(username, name, changes)

    async def breaker_closed(self, username: str, name: str) -> Destination:
        """A probe succeeded: a destination the breaker paused is ``active`` again."""
        current = await self._destinations.require(username, name)
        if not held_by_breaker(current):
            return current
        changes = {"state": DestinationState.ACTIVE, "state_reason": None, **_CLOSED_BREAKER}
        return await self._write(username, name, changes)

    async def disabled(
        self, username: str, name: str, reason: StateReason, *, opened_at: datetime | None
    ) -> Destination:
        """410 Gone or sustained failure: ``disabled`` with ``reason``, unless its owner
        paused it (it holds anyway) or it is disabled already."""
        current = await self._destinations.require(username, name)
        if current.state is not DestinationState.ACTIVE and not held_by_breaker(current):
            return current
        changes = {
            "state": DestinationState.DISABLED, "state_reason": reason,
            "breaker.state": BreakerState.OPEN.value, "breaker.opened_at": opened_at,
            "breaker.next_probe_at": None,
        }  # fmt: skip
        return await self._write(username, name, changes)

    async def _write(self, username: str, name: str, changes: dict[str, Any]) -> Destination:
        destination = await self._destinations.update(username, name, changes)
        if self._publisher is not None:
            await self._publisher.destination_changed(destination)
        return destination

"""Destinations: where routes deliver, with their delivery controls and state, and their health
(what is held for them, their last errors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from hookbay_common.clock import utcnow
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import (
    DestinationFailureRepository,
    DestinationRepository,
    FailedAttempt,
    HoldRepository,
    HoldState,
    UserRepository,
    WebhookRepository,
)
from hookbay_common.db.forwarding import forward_webhook
from hookbay_common.destination_state import DestinationStates
from hookbay_common.errors import DestinationInUse, ForwardUrlManaged, InvalidField
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Breaker, Destination
from hookbay_common.names import is_valid_webhook_name
from hookbay_common.netguard import DestinationNotAllowed, check_destination
from hookbay_dashboard.destinations.schemas import (
    SECRET_MASK,
    BreakerWrite,
    DestinationCreate,
    DestinationUpdate,
)


def check_resource_name(value: str, field: str = "name") -> str:
    """A destination's or a route's name follows the webhook-name rule; else a 422 naming
    ``field``."""
    if not is_valid_webhook_name(value):
        raise InvalidField(
            (field,),
            f"invalid name {value!r}: up to 64 characters of a-z and 0-9 in words joined by "
            "single '-'",
            "name_invalid",
        )
    return value


@dataclass(frozen=True, slots=True)
class DestinationHealth:
    hold: HoldState
    last_errors: list[FailedAttempt]


class DestinationService:
    """An owner's destinations. Every change is published to the configuration change log
    after its MongoDB write when a ``publisher`` is given."""

    def __init__(
        self,
        destinations: DestinationRepository,
        users: UserRepository,
        webhooks: WebhookRepository,
        *,
        allow_private: bool,
        publisher: ConfigPublisher | None = None,
        holds: HoldRepository | None = None,
        failures: DestinationFailureRepository | None = None,
    ) -> None:
        self._destinations = destinations
        self._holds = holds
        self._failures = failures
        self._users = users
        self._webhooks = webhooks
        self._allow_private = allow_private
        self._publisher = publisher
        self._states = DestinationStates(destinations, publisher)

    async def _published(self, destination: Destination) -> Destination:
        if self._publisher is not None:
            await self._publisher.destination_changed(destination)
        return destination

    async def _checked_url(self, url: str) -> str:
        try:
            await check_destination(url, allow_private=self._allow_private)
        except DestinationNotAllowed as exc:
            raise InvalidField(("url",), exc.message, "destination_not_allowed") from None
        return url

    async def create(self, username: str, write: DestinationCreate) -> Destination:
        await self._users.require(username)
        check_resource_name(write.name)
        if write.headers and SECRET_MASK in write.headers.values():
            raise InvalidField(("headers",), f"{SECRET_MASK!r} is what a stored value reads as")
        now = utcnow()
        destination = Destination(
            id=new_id(IdPrefix.DESTINATION), username=username, name=write.name,
            url=await self._checked_url(write.url), timeout_s=write.timeout_s,
            headers={k: SecretStr(v) for k, v in (write.headers or {}).items()},
            retry_schedule=tuple(write.retry_schedule) if write.retry_schedule else None,
            rate_limit=write.rate_limit.record() if write.rate_limit else None,
            max_concurrency=write.max_concurrency, created_at=now, updated_at=now,
            breaker=_breaker(write.breaker, Breaker()),
        )  # fmt: skip
        return await self._published(await self._destinations.create(destination))

    async def get(self, username: str, name: str) -> Destination:
        """``DestinationNotFound`` also when ``name`` belongs to another owner."""
        return await self._destinations.require(username, name)

    async def health(self, username: str, name: str) -> DestinationHealth:
        """What is held for the destination (the hold store's count and oldest, by its id) and
        its newest failed attempts since it was created; each a read of a few documents by
        ``_id``, whatever the owner's history holds. ``DestinationNotFound`` also when ``name``
        belongs to another owner."""
        destination = await self._destinations.require(username, name)
        hold = HoldState(0, 0, None)
        if self._holds is not None:
            hold = await self._holds.state(destination.id)
        last_errors: list[FailedAttempt] = []
        if self._failures is not None:
            last_errors = await self._failures.recent(username, name, since=destination.created_at)
        return DestinationHealth(hold, last_errors)

    async def list_for_owner(self, username: str) -> list[Destination]:
        await self._users.require(username)
        return await self._destinations.list_for_owner(username)

    async def change(self, username: str, name: str, write: DestinationUpdate) -> Destination:
        """Change the fields sent (``DestinationUpdate``); nothing sent reads the destination.
        A ``forward_url``'s destination takes its URL from its webhook (``ForwardUrlManaged``
        when another is sent)."""
        current = await self._destinations.require(username, name)
        sent = write.model_fields_set
        changes: dict[str, Any] = {}
        webhook = forward_webhook(name)
        if webhook is not None and "url" in sent and write.url not in (None, current.url):
            raise ForwardUrlManaged(webhook, f"destination {name!r}'s URL")
        if "url" in sent and write.url is not None:
            changes["url"] = await self._checked_url(write.url)
        for field in ("timeout_s", "max_concurrency"):
            if field in sent:
                changes[field] = getattr(write, field)
        if "headers" in sent:
            changes["headers"] = _merged_headers(write.headers or {}, current.headers)
        if "retry_schedule" in sent:
            schedule = write.retry_schedule
            changes["retry_schedule"] = tuple(schedule) if schedule is not None else None
        if "rate_limit" in sent:
            changes["rate_limit"] = write.rate_limit.record() if write.rate_limit else None
        if write.breaker is not None:
            breaker = _breaker(write.breaker, current.breaker)
            if breaker != current.breaker:
                changes["breaker"] = breaker
        if not changes:
            return current
        return await self._published(await self._destinations.update(username, name, changes))

    async def pause(self, username: str, name: str) -> Destination:
        """Hold its deliveries until resumed: ``paused`` / ``manual``
        (``DestinationStates.pause``, the code path the deliverer's breaker writes through)."""
        return await self._states.pause(username, name)

    async def resume(self, username: str, name: str) -> Destination:
        """``active`` again, whatever paused or disabled it, its breaker closed; held
        deliveries go out (``DestinationStates.resume``)."""
        return await self._states.resume(username, name)

    async def delete(self, username: str, name: str) -> None:
        """``DestinationInUse`` (409, naming them) while routes deliver to it;
        ``ForwardUrlManaged`` for a ``forward_url``'s (removing the ``forward_url`` deletes it)."""
        await self._destinations.require(username, name)
        if (webhook := forward_webhook(name)) is not None:
            raise ForwardUrlManaged(webhook, f"destination {name!r}")
        users = await self.routes_using(username, name)
        if users:
            raise DestinationInUse(name, users)
        await self._destinations.delete(username, name)
        if self._publisher is not None:
            await self._publisher.destination_deleted(username, name)

    async def routes_using(self, username: str, name: str) -> list[str]:
        """``webhook/route`` of every route of the owner's that delivers to ``name``."""
        return [
            f"{webhook.name}/{route.name}"
            for webhook in await self._webhooks.list_for_owner(username)
            for route in webhook.routes
            if route.destination == name
        ]


def _merged_headers(sent: dict[str, str], stored: dict[str, SecretStr]) -> dict[str, SecretStr]:
    """The headers sent, a value sent as the mask replaced by the stored value of its name."""
    merged: dict[str, SecretStr] = {}
    for header, value in sent.items():
        if value == SECRET_MASK:
            if header not in stored:
                raise InvalidField(
                    ("headers", header),
                    f"{SECRET_MASK!r} keeps a stored value, and there is none for {header!r}",
                )
            merged[header] = stored[header]
        else:
            merged[header] = SecretStr(value)
    return merged


def _breaker(write: BreakerWrite | None, current: Breaker) -> Breaker:
    """``current`` with the thresholds sent; thresholds that contradict each other are a 422
    naming the one sent."""
    if write is None:
        return current
    merged = write.applied_to(current)
    if merged.max_cooldown_s < merged.cooldown_s:
        field = "max_cooldown_s" if write.max_cooldown_s is not None else "cooldown_s"
        raise InvalidField(("breaker", field), "max_cooldown_s must be at least cooldown_s")
    if merged.disable_after_s < merged.max_cooldown_s:
        field = "disable_after_s" if write.disable_after_s is not None else "max_cooldown_s"
        raise InvalidField(("breaker", field), "disable_after_s must be at least max_cooldown_s")
    return merged

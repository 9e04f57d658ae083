"""An owner's alert channels: made, listed, deleted and tested."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final

from pydantic import SecretStr

from hookbay_common.alerts import Notification, Notifier, check_secret
from hookbay_common.clock import utcnow
from hookbay_common.db import AlertChannelRepository, UserRepository
from hookbay_common.errors import InvalidField
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import AlertChannel, AlertChannelType, Issue, IssueType, Notified
from hookbay_common.netguard import DestinationNotAllowed, check_destination
from hookbay_dashboard.alerts.schemas import AlertChannelCreate

MAX_CHANNELS: Final = 20
_EMAIL: Final = re.compile(r"^[^@\s<>,;\"]+@[^@\s<>,;\"]+\.[^@\s<>,;\"]+$")
_FIELDS: Final = {
    AlertChannelType.WEBHOOK: ({"url", "secret"}, set()),
    AlertChannelType.SLACK: ({"url"}, set()),
    AlertChannelType.PAGERDUTY: ({"routing_key"}, {"events_url"}),
    AlertChannelType.EMAIL: ({"to"}, set()),
}
"""Per type: the fields it needs, and those it may have."""


class AlertChannelService:
    def __init__(
        self,
        channels: AlertChannelRepository,
        users: UserRepository,
        notifier: Notifier,
        *,
        allow_private: bool,
        email_enabled: bool,
    ) -> None:
        self._channels = channels
        self._users = users
        self._notifier = notifier
        self._allow_private = allow_private
        self._email_enabled = email_enabled

    async def list_for_owner(self, username: str) -> list[AlertChannel]:
        return await self._channels.list_for_owner(username)

    async def get(self, username: str, channel_id: str) -> AlertChannel:
        return await self._channels.require(username, channel_id)

    async def create(self, username: str, write: AlertChannelCreate) -> AlertChannel:
        """A field its type does not take, or lacks, or that the rules refuse (the SSRF
        guard, the secret's form, an address): 422 naming it."""
        await self._users.require(username)
        needed, optional = _FIELDS[write.type]
        for field in ("url", "secret", "routing_key", "events_url", "to"):
            given = getattr(write, field) is not None
            if field in needed and not given:
                raise InvalidField((field,), f"a {write.type.value} channel needs {field}")
            if given and field not in needed | optional:
                raise InvalidField((field,), f"a {write.type.value} channel takes no {field}")
        if write.to is not None and not _EMAIL.fullmatch(write.to):
            raise InvalidField(("to",), "one email address, such as ops@example.com")
        if write.type is AlertChannelType.EMAIL and not self._email_enabled:
            raise InvalidField(("type",), "this installation has no SMTP server (HOOKBAY_SMTP_URL)")
        if len(await self._channels.list_for_owner(username)) >= MAX_CHANNELS:
            raise InvalidField(("type",), f"at most {MAX_CHANNELS} alert channels per owner")
        for field in ("url", "events_url"):
            value = getattr(write, field)
            if value is not None:
                await self._checked_url(field, value)
        if write.secret is not None:
            try:
                check_secret(write.secret)
            except ValueError as exc:
                raise InvalidField(("secret",), str(exc)) from None
        channel = AlertChannel(
            id=new_id(IdPrefix.ALERT_CHANNEL), username=username, type=write.type,
            url=_sealed(write.url), secret=_sealed(write.secret),
            routing_key=_sealed(write.routing_key), events_url=write.events_url, to=write.to,
            created_at=utcnow(),
        )  # fmt: skip
        return await self._channels.create(channel)

    async def delete(self, username: str, channel_id: str) -> None:
        await self._channels.delete(username, channel_id)

    async def test(self, username: str, channel_id: str) -> str | None:
        """Send a test notification now (``issue.opened`` with ``"test": true``; PagerDuty
        gets the trigger and its resolve); the error, ``None`` when it went out."""
        channel = await self._channels.require(username, channel_id)
        now = utcnow()
        return await self._notifier.test(channel, Notification(
            Notified.OPENED, _sample_issue(username, now), test=True
        ))  # fmt: skip

    async def _checked_url(self, field: str, url: str) -> None:
        try:
            await check_destination(url, allow_private=self._allow_private)
        except DestinationNotAllowed as exc:
            raise InvalidField((field,), exc.message, "destination_not_allowed") from None


def _sealed(value: str | None) -> SecretStr | None:
    return SecretStr(value) if value is not None else None


def _sample_issue(username: str, now: datetime) -> Issue:
    return Issue(
        id=new_id(IdPrefix.ISSUE), username=username, type=IssueType.DELIVERY,
        key="delivery:example", destination="example", reason="test notification",
        first_seen_at=now, last_seen_at=now, opened_at=now, count=1,
    )  # fmt: skip

"""Webhooks: creation, destination and secret changes, activation."""

from __future__ import annotations

import secrets
from typing import Any

from pydantic import SecretStr

from hookbay_common.clock import utcnow
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import StatsRepository, UserRepository, WebhookRepository
from hookbay_common.errors import InvalidRequest
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Webhook
from hookbay_common.names import check_username, check_webhook_name
from hookbay_common.netguard import check_destination

UNCHANGED: Any = object()
MIN_SECRET_LENGTH = 8


class WebhookService:
    """Webhooks of an owner. Every change is published to the configuration change log after
    its MongoDB write when a ``publisher`` is given (ingest replicas apply it at once)."""

    def __init__(
        self,
        webhooks: WebhookRepository,
        users: UserRepository,
        *,
        allow_private: bool,
        stats: StatsRepository,
        publisher: ConfigPublisher | None = None,
    ) -> None:
        self._webhooks = webhooks
        self._users = users
        self._stats = stats
        self._allow_private = allow_private
        self._publisher = publisher

    async def _published(self, webhook: Webhook) -> Webhook:
        if self._publisher is not None:
            await self._publisher.webhook_changed(webhook)
        return webhook

    async def create(
        self,
        username: str,
        name: str,
        *,
        secret: str | None = None,
        forward_url: str | None = None,
    ) -> Webhook:
        check_username(username)
        check_webhook_name(name)
        await self._users.require(username)
        if forward_url is not None:
            await check_destination(forward_url, allow_private=self._allow_private)
        now = utcnow()
        created = await self._webhooks.create(
            Webhook(
                id=new_id(IdPrefix.WEBHOOK),
                username=username,
                name=name,
                secret=_checked_secret(secret),
                forward_url=forward_url,
                active=True,
                created_at=now,
                updated_at=now,
            )
        )
        return await self._published(created)

    async def change(
        self,
        username: str,
        name: str,
        *,
        secret: str | None = UNCHANGED,
        forward_url: str | None = UNCHANGED,
    ) -> Webhook:
        """Set or remove (``None``) the secret and the forward URL; ``UNCHANGED`` leaves one as is."""
        changes: dict[str, Any] = {}
        if secret is not UNCHANGED:
            changes["secret"] = _checked_secret(secret)
        if forward_url is not UNCHANGED:
            if forward_url is not None:
                await check_destination(forward_url, allow_private=self._allow_private)
            changes["forward_url"] = forward_url
        return await self._published(await self._webhooks.update(username, name, **changes))

    async def get(self, username: str, name: str) -> Webhook:
        """``WebhookNotFound`` also when ``name`` belongs to another owner."""
        return await self._webhooks.require(username, name)

    async def delete(self, username: str, name: str) -> None:
        """Delete the webhook (ingest answers 404 for it once the change log delivers the
        deletion), then its stats. Its events stay until retention removes them, reachable by
        id; a new webhook with the same name starts empty (it has a new id). Buckets the stats
        processor writes afterwards for events still in flight, or stats left by a deletion
        that failed midway, go with the owner's retention."""
        webhook = await self._webhooks.require(username, name)
        await self._webhooks.delete(username, name)
        if self._publisher is not None:
            await self._publisher.webhook_deleted(username, name)
        await self._stats.delete_webhook(webhook.id, username)

    async def set_active(self, username: str, name: str, active: bool) -> Webhook:
        return await self._published(await self._webhooks.update(username, name, active=active))

    async def list_for_owner(self, username: str) -> list[Webhook]:
        await self._users.require(username)
        return await self._webhooks.list_for_owner(username)


def generate_secret() -> str:
    """A new signing secret: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def _checked_secret(secret: str | None) -> SecretStr | None:
    if secret is None:
        return None
    if len(secret) < MIN_SECRET_LENGTH or secret != secret.strip():
        raise InvalidRequest(
            f"secret must be at least {MIN_SECRET_LENGTH} characters, without surrounding spaces"
        )
    return SecretStr(secret)

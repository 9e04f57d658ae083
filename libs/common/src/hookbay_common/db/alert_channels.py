"""The ``alert_channels`` collection: an owner's notification channels. ``url``, ``secret``
and ``routing_key`` are sealed with ``SecretBox`` before they are stored."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import SecretStr

from hookbay_common.db.client import Collections, Database
from hookbay_common.errors import AlertChannelNotFound
from hookbay_common.models import AlertChannel
from hookbay_common.secrets_box import SecretBox

_SEALED = ("url", "secret", "routing_key")


class AlertChannelRepository:
    def __init__(self, db: Database, box: SecretBox) -> None:
        self._channels = db[Collections.ALERT_CHANNELS]
        self._box = box

    def _to_document(self, channel: AlertChannel) -> dict[str, Any]:
        doc = channel.model_dump(mode="python", exclude={"id", *_SEALED})
        doc["_id"] = channel.id
        for field in _SEALED:
            value: SecretStr | None = getattr(channel, field)
            doc[field] = self._box.seal(value.get_secret_value()) if value is not None else None
        return doc

    def _from_document(self, doc: dict[str, Any]) -> AlertChannel:
        doc = dict(doc)
        doc["id"] = doc.pop("_id")
        for field in _SEALED:
            if doc.get(field) is not None:
                doc[field] = SecretStr(self._box.open(doc[field]))
        return AlertChannel.model_validate(doc)

    async def create(self, channel: AlertChannel) -> AlertChannel:
        await self._channels.insert_one(self._to_document(channel))
        return channel

    async def get(self, username: str, channel_id: str) -> AlertChannel | None:
        doc = await self._channels.find_one({"_id": channel_id})
        if doc is None or doc.get("username") != username:
            return None
        return self._from_document(doc)

    async def require(self, username: str, channel_id: str) -> AlertChannel:
        channel = await self.get(username, channel_id)
        if channel is None:
            raise AlertChannelNotFound(channel_id)
        return channel

    async def list_for_owner(self, username: str) -> list[AlertChannel]:
        found = [self._from_document(d) async for d in self._channels.find({"username": username})]
        return sorted(found, key=lambda c: c.id)

    async def delete(self, username: str, channel_id: str) -> None:
        await self.require(username, channel_id)
        await self._channels.delete_one({"_id": channel_id})

    async def mark_sent(self, channel_id: str, at: datetime) -> None:
        """A notification went out: the channel is healthy again."""
        await self._channels.update_one(
            {"_id": channel_id},
            {"$set": {"last_sent_at": at, "last_error": None, "failing_since": None}},
        )

    async def mark_failed(self, channel_id: str, error: str, at: datetime) -> None:
        """A notification failed: ``last_error``, and ``failing_since`` unless already set."""
        await self._channels.update_one({"_id": channel_id}, {"$set": {"last_error": error}})
        await self._channels.update_one(
            {"_id": channel_id, "failing_since": None}, {"$set": {"failing_since": at}}
        )

    async def delete_for_owner(self, username: str) -> None:
        await self._channels.delete_many({"username": username})

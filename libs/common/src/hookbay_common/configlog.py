"""The configuration change log: how a change to a user, a webhook (with its routes), a
destination or a transformation reaches every replica that keeps a view of the configuration.

Every writer (the dashboard API, the ``hookbay-admin`` CLI, the admin endpoints, ``hookbay-admin migrate``)
publishes each change to the compacted topic ``Topics.config`` *after* its MongoDB write: the
record as stored (a webhook's secrets, its ``verification``'s included, a destination's
header values and a transformation's env values sealed with ``SecretBox``, never in clear; a
user without
its password hash), or a deletion. Replicas follow the topic (``hookbay_common.changelog``) and
apply each change to their in-memory view: ingest's (``hookbay_ingest.view``) holds users and
webhooks and skips destinations; the forwarder's (``hookbay_forwarder.routing.view``) holds the
webhooks that have routes, every destination and every transformation (routes run them), and
skips users; ingest's skips transformations.

Compatibility: a webhook's record carries ``routes`` only when it has some, and a
``verification`` only when it has one, so a record of a webhook without them reads on a replica
of an earlier version.

Ordering: ``at`` (the record's ``updated_at``, or the moment of a deletion) orders the changes of
one key. A replica ignores a change older than what it holds, so two writers racing each other
cannot leave an older state in place.

Loss: a publication can be lost (the writer dies between its two writes, or Kafka is away); the
publisher logs it and the writer's call still succeeds, because the change *is* committed. Each
view's periodic reconciliation with MongoDB repairs such a loss.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from pydantic import SecretStr

from hookbay_common.clock import utcnow
from hookbay_common.logs import get_logger
from hookbay_common.models import Destination, Transformation, User, Webhook, WebhookVerification
from hookbay_common.secrets_box import SecretBox

log = get_logger("hookbay.configlog")

FORMAT_VERSION: Final = 1
PUBLISH_TIMEOUT: Final = 5.0
"""Longest wait for Kafka's acknowledgement of one change before it is left to reconciliation."""

Send = Callable[[str, bytes, bytes], Awaitable[object]]
"""``send(topic, key, value)``: returns once Kafka acknowledged the record, raises otherwise."""


class Entity(StrEnum):
    USER = "user"
    WEBHOOK = "webhook"
    DESTINATION = "destination"
    TRANSFORMATION = "transformation"


ConfigKey = tuple[str, ...]
"""``("user", username)``, ``("webhook", username, name)``, ``("destination", username,
name)`` or ``("transformation", username, name)``: one entry of a view."""


def user_key(username: str) -> ConfigKey:
    return (Entity.USER.value, username)


def webhook_key(username: str, name: str) -> ConfigKey:
    return (Entity.WEBHOOK.value, username, name)


def destination_key(username: str, name: str) -> ConfigKey:
    return (Entity.DESTINATION.value, username, name)


def transformation_key(username: str, name: str) -> ConfigKey:
    return (Entity.TRANSFORMATION.value, username, name)


def kafka_key(key: ConfigKey) -> bytes:
    """``user:alice`` / ``webhook:alice/orders`` / ``destination:alice/billing``: the message
    key, what compaction keeps one of."""
    return f"{key[0]}:{'/'.join(key[1:])}".encode()


def normalized_user(user: User) -> User:
    """The user as the view (and the change log) holds it: without its password hash."""
    return user if user.password_hash is None else user.model_copy(update={"password_hash": None})


@dataclass(frozen=True)
class ConfigChange:
    """One change: the record after it (``user``, ``webhook``, ``destination`` or
    ``transformation``), or a deletion (none of them)."""

    key: ConfigKey
    at: datetime
    user: User | None = None
    webhook: Webhook | None = None
    destination: Destination | None = None
    transformation: Transformation | None = None

    @property
    def deleted(self) -> bool:
        return (
            self.user is None
            and self.webhook is None
            and self.destination is None
            and self.transformation is None
        )

    @classmethod
    def of_user(cls, user: User) -> ConfigChange:
        return cls(user_key(user.username), user.updated_at, user=normalized_user(user))

    @classmethod
    def of_webhook(cls, webhook: Webhook) -> ConfigChange:
        return cls(webhook_key(webhook.username, webhook.name), webhook.updated_at, webhook=webhook)

    @classmethod
    def of_destination(cls, destination: Destination) -> ConfigChange:
        key = destination_key(destination.username, destination.name)
        return cls(key, destination.updated_at, destination=destination)

    @classmethod
    def of_transformation(cls, transformation: Transformation) -> ConfigChange:
        key = transformation_key(transformation.username, transformation.name)
        return cls(key, transformation.updated_at, transformation=transformation)

    @classmethod
    def deletion(cls, key: ConfigKey, at: datetime | None = None) -> ConfigChange:
        return cls(key, at or utcnow())


def encode_change(change: ConfigChange, box: SecretBox) -> bytes:
    record: dict[str, Any] | None = None
    if change.user is not None:
        record = change.user.model_dump(mode="json", exclude={"password_hash"})
    elif change.webhook is not None:
        record = change.webhook.model_dump(mode="json", exclude={"secret", "verification"})
        secret = change.webhook.secret
        record["secret"] = box.seal(secret.get_secret_value()) if secret else None
        verification = change.webhook.verification
        if verification is not None:  # absent when none: records readable by older replicas
            record["verification"] = verification.to_document(box.seal)
        if not change.webhook.routes:  # the same
            del record["routes"]
        for route in record.get("routes", ()):  # the same: transform and delay only when set
            for optional in ("transform", "delay_s"):
                if route.get(optional) is None:
                    route.pop(optional, None)
    elif change.destination is not None:
        record = change.destination.model_dump(mode="json", exclude={"headers"})
        record["headers"] = {
            name: box.seal(value.get_secret_value())
            for name, value in change.destination.headers.items()
        }
    elif change.transformation is not None:
        record = change.transformation.model_dump(mode="json", exclude={"env"})
        record["env"] = {
            name: box.seal(value.get_secret_value())
            for name, value in change.transformation.env.items()
        }
    document = {
        "v": FORMAT_VERSION,
        "key": list(change.key),
        "at": change.at.isoformat(),
        "record": record,
    }
    return json.dumps(document, separators=(",", ":")).encode()


class UnreadableChange(ValueError):
    """A change-log record this version cannot read (it is skipped, and counted)."""


def decode_change(value: bytes, box: SecretBox) -> ConfigChange:
    try:
        document = json.loads(value)
        key = tuple(str(part) for part in document["key"])
        at = datetime.fromisoformat(document["at"])
        record = document["record"]
        if document.get("v") != FORMAT_VERSION or key[0] not in set(Entity) or len(key) < 2:
            raise UnreadableChange(f"unknown change-log record {key!r}")
        if record is None:
            return ConfigChange(key, at)
        if key[0] == Entity.USER:
            return ConfigChange(key, at, user=User.model_validate(record))
        if key[0] == Entity.DESTINATION:
            headers = record.pop("headers", None) or {}
            record["headers"] = {k: SecretStr(box.open(v)) for k, v in headers.items()}
            return ConfigChange(key, at, destination=Destination.model_validate(record))
        if key[0] == Entity.TRANSFORMATION:
            env = record.pop("env", None) or {}
            record["env"] = {k: SecretStr(box.open(v)) for k, v in env.items()}
            return ConfigChange(key, at, transformation=Transformation.model_validate(record))
        sealed = record.pop("secret", None)
        record["secret"] = SecretStr(box.open(sealed)) if sealed else None
        verification = record.pop("verification", None)
        if verification is not None:
            record["verification"] = WebhookVerification.from_document(verification, box.open)
        return ConfigChange(key, at, webhook=Webhook.model_validate(record))
    except UnreadableChange:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise UnreadableChange(f"unreadable change-log record: {type(exc).__name__}") from None


class ConfigPublisher:
    """Publishes configuration changes after their MongoDB writes.

    Never raises for Kafka's sake: the change is already committed, and an error here would tell
    the caller it was not. A publication that fails (Kafka away, no acknowledgement within
    ``timeout``) is logged as ``config_publish_failed`` and repaired by the views' reconciliation.
    """

    def __init__(
        self, send: Send, topic: str, box: SecretBox, *, timeout: float = PUBLISH_TIMEOUT
    ) -> None:
        self._send = send
        self._topic = topic
        self._box = box
        self._timeout = timeout

    async def user_changed(self, user: User) -> bool:
        return await self.publish(ConfigChange.of_user(user))

    async def user_deleted(self, username: str) -> bool:
        return await self.publish(ConfigChange.deletion(user_key(username)))

    async def webhook_changed(self, webhook: Webhook) -> bool:
        return await self.publish(ConfigChange.of_webhook(webhook))

    async def webhook_deleted(self, username: str, name: str) -> bool:
        return await self.publish(ConfigChange.deletion(webhook_key(username, name)))

    async def destination_changed(self, destination: Destination) -> bool:
        return await self.publish(ConfigChange.of_destination(destination))

    async def destination_deleted(self, username: str, name: str) -> bool:
        return await self.publish(ConfigChange.deletion(destination_key(username, name)))

    async def transformation_changed(self, transformation: Transformation) -> bool:
        return await self.publish(ConfigChange.of_transformation(transformation))

    async def transformation_deleted(self, username: str, name: str) -> bool:
        return await self.publish(ConfigChange.deletion(transformation_key(username, name)))

    async def publish(self, change: ConfigChange) -> bool:
        """True once Kafka acknowledged ``change``; False (logged) when it could not."""
        value = encode_change(change, self._box)
        try:
            async with asyncio.timeout(self._timeout):
                await self._send(self._topic, kafka_key(change.key), value)
        except Exception as exc:
            log.warning(
                "config_publish_failed",
                key=kafka_key(change.key).decode(),
                reason=type(exc).__name__,
            )
            return False
        return True

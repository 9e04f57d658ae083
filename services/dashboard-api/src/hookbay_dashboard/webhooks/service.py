"""Webhooks: creation, destination, secret and verification changes, activation."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from pydantic import SecretStr, ValidationError

from hookbay_common.clock import utcnow
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import (
    DestinationRepository,
    StatsRepository,
    UserRepository,
    WebhookRepository,
)
from hookbay_common.db.forwarding import forward_destination, keep_forward_route
from hookbay_common.errors import InvalidRequest
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import (
    REQUIRED_FIELDS,
    PreviousSecret,
    VerificationType,
    Webhook,
    WebhookVerification,
)
from hookbay_common.names import check_username, check_webhook_name
from hookbay_common.netguard import check_destination
from hookbay_dashboard.webhooks.schemas import SECRET_MASK, VerificationWrite

UNCHANGED: Any = object()
MIN_SECRET_LENGTH = 8


class VerificationInvalid(InvalidRequest):
    """A verification the webhook cannot work with: a field its type needs is missing, or a
    value is refused. 422 with the API's validation body: ``detail`` lists each problem with
    its ``loc`` (``["body", "verification", <field>...]``), ``msg`` and ``type``."""

    status_code = 422

    @classmethod
    def of_field(cls, field: str, msg: str) -> VerificationInvalid:
        detail = [{"loc": ["body", "verification", field], "msg": msg, "type": "value_error"}]
        return cls(f"verification.{field}: {msg}", detail=detail)

    @classmethod
    def of(cls, exc: ValidationError) -> VerificationInvalid:
        detail = [
            {"loc": ["body", "verification", *e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors()
        ]
        message = "; ".join(
            f"{'.'.join(str(p) for p in d['loc'][1:])}: {d['msg']}" for d in detail[:5]
        )
        return cls(message, detail=detail)


class WebhookService:
    """Webhooks of an owner. Every change is published to the configuration change log after
    its MongoDB write when a ``publisher`` is given (ingest replicas apply it at once).

    A ``forward_url`` is one unfiltered route to a destination of the webhook's own
    (``hookbay_common.db.forwarding``): setting, changing or removing it writes them too."""

    def __init__(
        self,
        webhooks: WebhookRepository,
        users: UserRepository,
        destinations: DestinationRepository,
        *,
        allow_private: bool,
        stats: StatsRepository,
        publisher: ConfigPublisher | None = None,
    ) -> None:
        self._webhooks = webhooks
        self._destinations = destinations
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
        verification: VerificationWrite | None = None,
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
                verification=resolve_verification(verification, None, now=now)
                if verification is not None
                else None,
                active=True,
                created_at=now,
                updated_at=now,
            )
        )
        if forward_url is not None:  # the webhook first: its name is taken by then
            return await self._forwarding(created, forward_url)
        return await self._published(created)

    async def change(
        self,
        username: str,
        name: str,
        *,
        secret: str | None = UNCHANGED,
        forward_url: str | None = UNCHANGED,
        verification: VerificationWrite | None = UNCHANGED,
    ) -> Webhook:
        """Set or remove (``None``) the plain secret, the verification and the forward URL;
        ``UNCHANGED`` leaves one as is. A plain secret set removes the verification and a
        verification set removes the plain secret (``resolve_verification`` builds it on the
        stored one: omitted secrets kept, a replaced secret kept as previous)."""
        changes: dict[str, Any] = {}
        if secret is not UNCHANGED:
            changes["secret"] = _checked_secret(secret)
            if secret is not None:
                changes["verification"] = None
        if verification is not UNCHANGED:
            if verification is None:
                changes["verification"] = None
            else:
                current = await self._webhooks.require(username, name)
                changes["verification"] = resolve_verification(
                    verification, current.effective_verification, now=utcnow()
                )
                changes["secret"] = None
        if forward_url is not UNCHANGED and forward_url is not None:
            await check_destination(forward_url, allow_private=self._allow_private)
        webhook = await self._webhooks.update(username, name, **changes)
        if forward_url is not UNCHANGED:
            return await self._forwarding(webhook, forward_url)
        return await self._published(webhook)

    async def _forwarding(self, webhook: Webhook, forward_url: str | None) -> Webhook:
        """Set ``forward_url`` with its route and destination; publish what changed (the
        destination before the route that names it, its deletion after)."""
        change = await keep_forward_route(self._webhooks, self._destinations, webhook, forward_url)
        if self._publisher is not None and change.destination is not None:
            await self._publisher.destination_changed(change.destination)
        await self._published(change.webhook)
        if self._publisher is not None and change.deleted is not None:
            await self._publisher.destination_deleted(webhook.username, change.deleted)
        return change.webhook

    async def get(self, username: str, name: str) -> Webhook:
        """``WebhookNotFound`` also when ``name`` belongs to another owner."""
        return await self._webhooks.require(username, name)

    async def delete(self, username: str, name: str) -> None:
        """Delete the webhook (ingest answers 404 for it once the change log delivers the
        deletion), then its ``forward_url`` destination (with any delivery it still held),
        then its stats. Its events stay until retention removes them, reachable by
        id; a new webhook with the same name starts empty (it has a new id). Buckets the stats
        processor writes afterwards for events still in flight, or stats left by a deletion
        that failed midway, go with the owner's retention."""
        webhook = await self._webhooks.require(username, name)
        await self._webhooks.delete(username, name)
        if self._publisher is not None:
            await self._publisher.webhook_deleted(username, name)
        forward = forward_destination(name)
        if await self._destinations.get(username, forward) is not None:
            await self._destinations.delete(username, forward)
            if self._publisher is not None:
                await self._publisher.destination_deleted(username, forward)
        await self._stats.delete_webhook(webhook.id, username)

    async def set_active(self, username: str, name: str, active: bool) -> Webhook:
        return await self._published(await self._webhooks.update(username, name, active=active))

    async def list_for_owner(self, username: str) -> list[Webhook]:
        await self._users.require(username)
        return await self._webhooks.list_for_owner(username)


def generate_secret() -> str:
    """A new signing secret: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def resolve_verification(
    write: VerificationWrite, current: WebhookVerification | None, *, now: datetime
) -> WebhookVerification:
    """The verification ``write`` asks for. When ``current`` (the webhook's effective
    verification, a plain secret included) has the same type, ``write`` is merged into it:
    fields not sent, and secrets sent as the mask, keep their stored value, a field sent as
    null is cleared, and a new ``secret`` (for ``basic`` and ``api-key``: password or key)
    rotates: the replaced one stays accepted for ``keep_previous_for_s`` seconds. Another type
    starts afresh. ``VerificationInvalid`` names each field the type needs and lacks, and a
    secret given to a type that uses none."""
    base = current if current is not None and current.type is write.type else None
    fields: dict[str, Any] = (
        {name: getattr(base, name) for name in WebhookVerification.model_fields} if base else {}
    )
    sent = write.model_fields_set - {"keep_previous_for_s"}
    for name in sent & {"type", "mode", "tolerance_s", "public_url", "public_key", "hmac"}:
        fields[name] = getattr(write, name)
    if "verify_token" in sent:
        token = write.verify_token
        fields["verify_token"] = token and _kept(token, fields.get("verify_token"))
    if "basic" in sent:
        fields["basic"] = write.basic and {
            "username": write.basic.username,
            "password": _kept(
                write.basic.password, base.basic.password if base and base.basic else None
            ),
        }
    if "api_key" in sent:
        fields["api_key"] = write.api_key and {
            "header": write.api_key.header,
            "value": _kept(
                write.api_key.value, base.api_key.value if base and base.api_key else None
            ),
        }
    new_secret = _kept(write.secret, None) if "secret" in sent else None
    if new_secret is not None and "secret" not in REQUIRED_FIELDS[write.type]:
        raise VerificationInvalid.of_field(
            "secret", f"secret is not used by verification type {write.type.value}"
        )
    if base is None or ("secret" in sent and write.secret is None):
        fields["secret"] = new_secret  # a secret sent as null is cleared
        fields["previous"] = None
    try:
        built = WebhookVerification.model_validate(fields)
    except ValidationError as exc:
        raise VerificationInvalid.of(exc) from None
    keep = write.keep_previous_for_s or 0
    if base is not None and new_secret is not None:
        built = built.rotated(SecretStr(new_secret), now=now, keep_previous_for_s=keep)
    elif base is not None and built.type in _CREDENTIAL_TYPES:
        built = _rotated_credential(base, built, now=now, keep_previous_for_s=keep)
    return built


_CREDENTIAL_TYPES = frozenset({VerificationType.BASIC, VerificationType.API_KEY})
"""Types whose password or key plays the secret's part (also in a rotation)."""


def _credential(verification: WebhookVerification) -> str | None:
    if verification.basic is not None:
        return verification.basic.password.get_secret_value()
    if verification.api_key is not None:
        return verification.api_key.value.get_secret_value()
    return None


def _rotated_credential(
    base: WebhookVerification, built: WebhookVerification, *, now: datetime,
    keep_previous_for_s: int,
) -> WebhookVerification:  # fmt: skip
    """``built`` whose replaced password or key stays accepted for ``keep_previous_for_s``."""
    old, new = _credential(base), _credential(built)
    if old is None or old == new:
        return built
    previous = None
    if keep_previous_for_s > 0:
        expires = now + timedelta(seconds=keep_previous_for_s)
        previous = PreviousSecret(secret=SecretStr(old), expires_at=expires)
    return built.model_copy(update={"previous": previous})


def _kept(sent: str | None, stored: SecretStr | None) -> str | None:
    """A secret as sent, or the stored one when sent as the mask (or, nested, omitted)."""
    if sent is None or sent == SECRET_MASK:
        return stored.get_secret_value() if stored is not None else None
    return sent


def _checked_secret(secret: str | None) -> SecretStr | None:
    if secret is None:
        return None
    if len(secret) < MIN_SECRET_LENGTH or secret != secret.strip():
        raise InvalidRequest(
            f"secret must be at least {MIN_SECRET_LENGTH} characters, without surrounding spaces"
        )
    return SecretStr(secret)

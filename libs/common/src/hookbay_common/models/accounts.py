"""Owners and what they hold: users, their webhooks, API tokens and dashboard sessions."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field, SecretStr

from hookbay_common.models.gateway import Route
from hookbay_common.models.record import Record
from hookbay_common.models.verification import VerificationType, WebhookVerification


class Role(StrEnum):
    USER = "user"
    ADMIN = "admin"


class User(Record):
    username: str
    plan: str
    role: Role = Role.USER
    password_hash: str | None = Field(default=None, repr=False)
    created_at: datetime
    updated_at: datetime

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


class Webhook(Record):
    """A receiving URL ``/w/{username}/{name}``. ``secret`` is plaintext in memory only.

    ``verification`` says how its requests are verified; without one, a ``secret`` means type
    ``hookbay`` in ``enforce`` mode (``effective_verification``)."""

    id: str
    username: str
    name: str
    secret: SecretStr | None = None
    verification: WebhookVerification | None = None
    forward_url: str | None = None
    active: bool = True
    routes: tuple[Route, ...] = ()
    """In order: the order owners see and the router evaluates."""

    @property
    def enabled_routes(self) -> tuple[Route, ...]:
        """The routes that take events, in order (a webhook with none is not routed)."""
        return tuple(route for route in self.routes if route.enabled)

    created_at: datetime
    updated_at: datetime

    def route(self, name: str) -> Route | None:
        return next((r for r in self.routes if r.name == name), None)

    @property
    def effective_verification(self) -> WebhookVerification | None:
        if self.verification is not None:
            return self.verification
        if self.secret is None:
            return None
        return WebhookVerification(type=VerificationType.HOOKBAY, secret=self.secret)


class ApiToken(Record):
    """A personal API token; only the SHA-256 of the token is stored."""

    id: str
    username: str
    name: str
    token_hash: str = Field(repr=False)
    created_at: datetime
    last_used_at: datetime | None = None


class Session(Record):
    """A dashboard login. ``id`` is the SHA-256 of the cookie value, which is never stored."""

    id: str
    username: str
    csrf_token: str = Field(repr=False)
    created_at: datetime
    expires_at: datetime

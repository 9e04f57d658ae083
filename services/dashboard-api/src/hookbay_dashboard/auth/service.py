"""Dashboard logins: password check (argon2id), throttling, sessions and their CSRF tokens.

A session is a random cookie value; only its SHA-256 is stored (``sessions``), with the user, an
absolute expiry and a CSRF token. Every replica can check any session, so logins survive a
replica's restart and need no sticky routing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from redis.exceptions import RedisError

from hookbay_common.clock import utcnow
from hookbay_common.db import SessionRepository, TokenRepository, UserRepository
from hookbay_common.errors import InvalidCredentials, NotAuthenticated, TooManyRequests
from hookbay_common.logs import get_logger
from hookbay_common.models import Session, User
from hookbay_common.ratelimit import RateLimiter

log = get_logger("hookbay.dashboard.auth")
_DUMMY_HASH = PasswordHasher().hash("not-a-real-password")
"""Verified against when the user does not exist, so both answers take the same time."""


@dataclass(frozen=True)
class Principal:
    """Who is calling: the user and how they proved it."""

    user: User
    via: Literal["session", "token"]
    session: Session | None = None

    @property
    def username(self) -> str:
        return self.user.username


@dataclass(frozen=True)
class Login:
    session: Session
    cookie: str
    """The cookie value; shown to the browser only."""


def session_id(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


class AuthService:
    def __init__(
        self,
        users: UserRepository,
        tokens: TokenRepository,
        sessions: SessionRepository,
        limiter: RateLimiter,
        *,
        session_ttl: float,
        limit_per_user: int,
        limit_per_address: int,
        hasher: PasswordHasher | None = None,
    ) -> None:
        self._users = users
        self._tokens = tokens
        self._sessions = sessions
        self._limiter = limiter
        self._ttl = timedelta(seconds=session_ttl)
        self._limit_per_user = limit_per_user
        self._limit_per_address = limit_per_address
        self._hasher = hasher or PasswordHasher()

    async def login(self, username: str, password: str, address: str) -> tuple[User, Login]:
        """A new session for ``username``; ``TooManyRequests`` when this user or address tried
        too often in the last minute (checked before the password), ``InvalidCredentials``
        for an unknown user, a user without password, or a wrong password alike."""
        await self._throttle(f"login:user:{username}", self._limit_per_user)
        await self._throttle(f"login:addr:{address}", self._limit_per_address)
        user = await self._users.get(username)
        if not self._password_matches(user, password):
            raise InvalidCredentials()
        assert user is not None
        cookie = secrets.token_urlsafe(32)
        now = utcnow()
        session = Session(
            id=session_id(cookie), username=user.username, csrf_token=secrets.token_urlsafe(24),
            created_at=now, expires_at=now + self._ttl,
        )  # fmt: skip
        await self._sessions.create(session)
        return user, Login(session, cookie)

    async def logout(self, session: Session) -> None:
        await self._sessions.delete(session.id)

    async def from_cookie(self, cookie: str) -> Principal:
        session = await self._sessions.get_active(session_id(cookie), utcnow())
        if session is None:
            raise NotAuthenticated("the session expired or was ended; log in again")
        return Principal(await self._live_user(session.username), "session", session)

    async def from_token(self, token: str) -> Principal:
        record = await self._tokens.find_by_token(token)
        if record is None:
            raise NotAuthenticated("the API token is unknown or was revoked")
        return Principal(await self._live_user(record.username), "token")

    @staticmethod
    def csrf_ok(session: Session, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(session.csrf_token, presented)

    async def _live_user(self, username: str) -> User:
        user = await self._users.get(username)
        if user is None:  # deleted since the session or token was issued
            raise NotAuthenticated("the account no longer exists")
        return user

    async def _throttle(self, key: str, limit: int) -> None:
        try:
            decision = await self._limiter.hit(key, limit)
        except RedisError:
            # fail open, like ingest: argon2id still makes every guess cost ~50 ms of CPU
            log.warning("login_throttle_unavailable")
            return
        if not decision.allowed:
            raise TooManyRequests(
                "too many login attempts; wait before trying again", decision.retry_after
            )

    def _password_matches(self, user: User | None, password: str) -> bool:
        stored = user.password_hash if user is not None else None
        try:
            return self._hasher.verify(stored or _DUMMY_HASH, password) and stored is not None
        except (VerificationError, InvalidHashError):
            return False

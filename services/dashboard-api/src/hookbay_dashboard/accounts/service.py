"""Users, plans and personal API tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from argon2 import PasswordHasher

from hookbay_common.clock import utcnow
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import (
    AlertChannelRepository,
    AttemptRepository,
    DestinationRepository,
    EventRepository,
    IssueRepository,
    SessionRepository,
    StatsRepository,
    TokenRepository,
    TransformationRepository,
    UserRepository,
    WebhookRepository,
)
from hookbay_common.errors import InvalidRequest
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import ApiToken, Role, User
from hookbay_common.names import check_username
from hookbay_common.plans import PlanBook
from hookbay_common.secrets_box import hash_api_token, new_api_token

MIN_PASSWORD_LENGTH = 8
_END_OF_TIME = datetime(9999, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class IssuedToken:
    """A token record plus the token itself, which is shown once and never stored."""

    record: ApiToken
    token: str


@dataclass(frozen=True)
class OwnerData:
    """Everything else an owner has: removed with the account (``AccountService.delete_user``)."""

    webhooks: WebhookRepository
    events: EventRepository
    attempts: AttemptRepository
    sessions: SessionRepository
    stats: StatsRepository
    destinations: DestinationRepository
    issues: IssueRepository
    alert_channels: AlertChannelRepository
    transformations: TransformationRepository


class AccountService:
    """Users, plans and tokens. A change to a user (creation, plan, deletion) is published to
    the configuration change log after its MongoDB write when a ``publisher`` is given."""

    def __init__(
        self,
        users: UserRepository,
        tokens: TokenRepository,
        plans: PlanBook,
        hasher: PasswordHasher | None = None,
        sessions: SessionRepository | None = None,
        publisher: ConfigPublisher | None = None,
        owner_data: OwnerData | None = None,
    ) -> None:
        self._users = users
        self._tokens = tokens
        self._plans = plans
        self._sessions = sessions
        self._publisher = publisher
        self._owner_data = owner_data
        self._hasher = hasher or PasswordHasher()  # argon2id with the library's current defaults

    async def create_user(
        self,
        username: str,
        *,
        plan: str | None = None,
        admin: bool = False,
        password: str | None = None,
    ) -> tuple[User, IssuedToken]:
        """Create a user and its first API token. Validates name, plan and password first."""
        check_username(username)
        plan_name = self._plans.get(plan or self._plans.default).name
        password_hash = self._hash_password(password) if password is not None else None
        now = utcnow()
        user = await self._users.create(
            User(
                username=username,
                plan=plan_name,
                role=Role.ADMIN if admin else Role.USER,
                password_hash=password_hash,
                created_at=now,
                updated_at=now,
            )
        )
        await self._published(user)
        return user, await self.create_token(username, name="initial")

    async def set_plan(self, username: str, plan: str) -> User:
        return await self._published(
            await self._users.update(username, plan=self._plans.get(plan).name)
        )

    async def delete_user(self, username: str) -> None:
        """Delete the account, then everything of the owner's: webhooks (with their routes),
        destinations, transformations, tokens, sessions, issues, alert channels, stats, events and their
        attempts. The account goes first, so ingest refuses the owner's
        requests (403) from the moment it is published; the rest follows in batches (on the
        embedded store it takes time in proportion to the owner's events)."""
        if self._owner_data is None:
            raise RuntimeError("AccountService was built without owner_data")
        data = self._owner_data
        await self._users.delete(username)
        if self._publisher is not None:
            await self._publisher.user_deleted(username)
        for webhook in await data.webhooks.list_for_owner(username):
            await data.webhooks.delete(username, webhook.name)
            if self._publisher is not None:
                await self._publisher.webhook_deleted(username, webhook.name)
        for destination in await data.destinations.list_for_owner(username):
            await data.destinations.delete(username, destination.name)
            if self._publisher is not None:
                await self._publisher.destination_deleted(username, destination.name)
        for transformation in await data.transformations.list_for_owner(username):
            await data.transformations.delete(username, transformation.name)
            if self._publisher is not None:
                await self._publisher.transformation_deleted(username, transformation.name)
        await self._tokens.delete_for_owner(username)
        await data.sessions.delete_for_owner(username)
        await data.issues.delete_for_owner(username)
        await data.alert_channels.delete_for_owner(username)
        await data.stats.delete_owner_days(username, _END_OF_TIME)
        await data.attempts.purge_owner(username)
        await data.events.purge_owner(username)

    async def _published(self, user: User) -> User:
        if self._publisher is not None:
            await self._publisher.user_changed(user)
        return user

    async def update_user(
        self,
        username: str,
        *,
        plan: str | None = None,
        role: Role | None = None,
        password: str | None = None,
    ) -> User:
        """Change what is given; a new password ends the user's dashboard sessions."""
        plan_name = self._plans.get(plan).name if plan is not None else None
        password_hash = self._hash_password(password) if password is not None else None
        user = await self._published(
            await self._users.update(
                username, plan=plan_name, role=role, password_hash=password_hash
            )
        )
        if password_hash is not None and self._sessions is not None:
            await self._sessions.delete_for_owner(username)
        return user

    async def list_users(self) -> list[User]:
        return await self._users.list_all()

    async def list_tokens(self, username: str) -> list[ApiToken]:
        return await self._tokens.list_for_owner(username)

    async def revoke_token(self, username: str, token_id: str) -> None:
        """``TokenNotFound`` also when the token belongs to someone else."""
        await self._tokens.delete(username, token_id)

    async def create_token(self, username: str, *, name: str = "cli") -> IssuedToken:
        await self._users.require(username)
        token = new_api_token()
        record = ApiToken(
            id=new_id(IdPrefix.TOKEN),
            username=username,
            name=name,
            token_hash=hash_api_token(token),
            created_at=utcnow(),
        )
        await self._tokens.create(record)
        return IssuedToken(record, token)

    def _hash_password(self, password: str) -> str:
        if len(password) < MIN_PASSWORD_LENGTH:
            raise InvalidRequest(f"password must be at least {MIN_PASSWORD_LENGTH} characters")
        return self._hasher.hash(password)

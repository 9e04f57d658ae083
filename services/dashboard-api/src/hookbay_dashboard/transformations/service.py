"""Transformations: an owner's JavaScript, checked when saved, and run on demand against one
of the owner's events or a request (docs/owners/transformations.md)."""

from __future__ import annotations

from pydantic import SecretStr

from hookbay_common.clock import utcnow
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import (
    EventRepository,
    TransformationRepository,
    UserRepository,
    WebhookRepository,
)
from hookbay_common.errors import (
    EventNotFound,
    InvalidField,
    PayloadTooLarge,
    TransformationInUse,
)
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Event, Transformation
from hookbay_dashboard.destinations.schemas import SECRET_MASK
from hookbay_dashboard.destinations.service import check_resource_name
from hookbay_dashboard.transformations.sandbox import Sandbox
from hookbay_dashboard.transformations.schemas import (
    ENV_MAX_BYTES,
    TransformationCreate,
    TransformationTest,
    TransformationUpdate,
)
from hookbay_sandbox import (
    CODE_MAX_BYTES,
    REQUEST_MAX_BYTES,
    TransformResult,
    request_of_event,
)


class TransformationService:
    """An owner's transformations. Every change is published to the configuration change log
    after its MongoDB write when a ``publisher`` is given. ``sandbox`` checks code when it is
    saved and runs the test calls."""

    def __init__(
        self,
        transformations: TransformationRepository,
        users: UserRepository,
        events: EventRepository,
        webhooks: WebhookRepository,
        sandbox: Sandbox,
        *,
        publisher: ConfigPublisher | None = None,
    ) -> None:
        self._transformations = transformations
        self._users = users
        self._events = events
        self._webhooks = webhooks
        self._sandbox = sandbox
        self._publisher = publisher

    async def _published(self, transformation: Transformation) -> Transformation:
        if self._publisher is not None:
            await self._publisher.transformation_changed(transformation)
        return transformation

    async def _checked_code(self, code: str) -> str:
        """413 over ``CODE_MAX_BYTES``; 422 naming ``code`` (with the line and column when
        the engine knows them) for code that cannot run."""
        size = len(code.encode())
        if size > CODE_MAX_BYTES:
            raise PayloadTooLarge(
                ("code",), f"the code is {size} bytes; the limit is {CODE_MAX_BYTES}"
            )
        error = await self._sandbox.check(code)
        if error is None:
            return code
        where = f" (line {error.line}, column {error.column})" if error.line is not None else ""
        raise InvalidField(
            ("code",), f"{error.message}{where}", f"transformation_{error.kind}",
            line=error.line, column=error.column,
        )  # fmt: skip

    async def create(self, username: str, write: TransformationCreate) -> Transformation:
        await self._users.require(username)
        check_resource_name(write.name)
        env = write.env or {}
        if SECRET_MASK in env.values():
            raise InvalidField(("env",), f"{SECRET_MASK!r} is what a stored value reads as")
        _check_env_size(env)
        code = await self._checked_code(write.code)
        now = utcnow()
        transformation = Transformation(
            id=new_id(IdPrefix.TRANSFORMATION), username=username, name=write.name, code=code,
            env={k: SecretStr(v) for k, v in env.items()}, version=1, created_at=now,
            updated_at=now,
        )  # fmt: skip
        return await self._published(await self._transformations.create(transformation))

    async def get(self, username: str, name: str) -> Transformation:
        """``TransformationNotFound`` also when ``name`` belongs to another owner."""
        return await self._transformations.require(username, name)

    async def list_for_owner(self, username: str) -> list[Transformation]:
        await self._users.require(username)
        return await self._transformations.list_for_owner(username)

    async def change(self, username: str, name: str, write: TransformationUpdate) -> Transformation:
        """Change what was sent; nothing that differs from what is stored reads the
        transformation and leaves ``version`` alone."""
        current = await self._transformations.require(username, name)
        sent = write.model_fields_set
        code: str | None = None
        env: dict[str, SecretStr] | None = None
        if "env" in sent:
            merged = _merged_env(write.env or {}, current.env)
            _check_env_size({k: v.get_secret_value() for k, v in merged.items()})
            if _plain(merged) != _plain(current.env):
                env = merged
        if "code" in sent and write.code is not None and write.code != current.code:
            code = await self._checked_code(write.code)
        if code is None and env is None:
            return current
        updated = await self._transformations.update(username, name, code=code, env=env)
        return await self._published(updated)

    async def delete(self, username: str, name: str) -> None:
        """``TransformationInUse`` (409, naming them) while routes run it."""
        await self._transformations.require(username, name)
        users = await self.routes_using(username, name)
        if users:
            raise TransformationInUse(name, users)
        await self._transformations.delete(username, name)
        if self._publisher is not None:
            await self._publisher.transformation_deleted(username, name)

    async def routes_using(self, username: str, name: str) -> list[str]:
        """``webhook/route`` of every route of the owner's that runs ``name``."""
        return [
            f"{webhook.name}/{route.name}"
            for webhook in await self._webhooks.list_for_owner(username)
            for route in webhook.routes
            if route.transform == name
        ]

    async def test(self, username: str, name: str, write: TransformationTest) -> TransformResult:
        """Run the stored code with its env on ``write``'s request or event (one of the
        caller's: another owner's is ``EventNotFound``). The owner's code failing is the
        result's ``error``, never an exception."""
        transformation = await self._transformations.require(username, name)
        if write.request is not None:
            request = write.request.to_request()
            try:
                size = len(request.to_json().encode())
            except (ValueError, RecursionError):  # infinity (1e400), or nesting past Python's
                raise InvalidField(("request", "body"), "not a JSON value") from None
            if size > REQUEST_MAX_BYTES:
                raise PayloadTooLarge(
                    ("request",),
                    f"the request is {size} bytes as JSON; the limit is {REQUEST_MAX_BYTES}",
                )
        else:
            request = request_of_event(await self._owned_event(username, write.event_id or ""))
        env = {k: v.get_secret_value() for k, v in transformation.env.items()}
        return await self._sandbox.run(username, transformation.code, request, env)

    async def _owned_event(self, username: str, event_id: str) -> Event:
        event = await self._events.get(event_id)
        if event is None or event.username != username:
            raise EventNotFound(event_id)
        return event


def _plain(env: dict[str, SecretStr]) -> dict[str, str]:
    return {k: v.get_secret_value() for k, v in env.items()}


def _check_env_size(env: dict[str, str]) -> None:
    size = sum(len(k.encode()) + len(v.encode()) for k, v in env.items())
    if size > ENV_MAX_BYTES:
        raise PayloadTooLarge(("env",), f"the env is {size} bytes; the limit is {ENV_MAX_BYTES}")


def _merged_env(sent: dict[str, str], stored: dict[str, SecretStr]) -> dict[str, SecretStr]:
    """The env sent, a value sent as the mask replaced by the stored value of its name."""
    merged: dict[str, SecretStr] = {}
    for name, value in sent.items():
        if value == SECRET_MASK:
            if name not in stored:
                raise InvalidField(
                    ("env", name),
                    f"{SECRET_MASK!r} keeps a stored value, and there is none for {name!r}",
                )
            merged[name] = stored[name]
        else:
            merged[name] = SecretStr(value)
    return merged

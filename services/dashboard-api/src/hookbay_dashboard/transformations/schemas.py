"""Bodies of ``/transformations``. Env values are write-only: a stored value reads as a mask."""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hookbay_common.models import Transformation
from hookbay_common.names import WEBHOOK_NAME_MAX
from hookbay_dashboard.destinations.schemas import SECRET_MASK
from hookbay_dashboard.schemas import Timestamp
from hookbay_sandbox import CODE_MAX_BYTES, TransformError, TransformRequest, TransformResult

MAX_ENV: Final = 50
MAX_ENV_NAME: Final = 64
MAX_ENV_VALUE: Final = 4096
ENV_MAX_BYTES: Final = 32 * 1024
"""The env's names and values together, as UTF-8: over it is a 413 naming ``env``."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_CODE_DOC = (
    "JavaScript registering addHandler('transform', (request, context) => request); at most "
    f"{CODE_MAX_BYTES} bytes as UTF-8 (413 beyond). Checked when saved: a syntax error, a top "
    "level that throws or spins, or no handler is a 422 naming code, with line and column."
)
_ENV_DOC = (
    f"context.env: at most {MAX_ENV} names (letters, digits, _; not starting with a digit) to "
    f"string values of at most {MAX_ENV_VALUE} characters, {ENV_MAX_BYTES} bytes in all (413 "
    f"beyond). Values are write-only (read as {SECRET_MASK!r}); on PATCH the map replaces the "
    f"stored one, and a value sent as {SECRET_MASK!r} keeps the stored value of that name."
)


def _check_env(value: dict[str, str] | None) -> dict[str, str] | None:
    if value is None:
        return None
    if len(value) > MAX_ENV:
        raise ValueError(f"at most {MAX_ENV} names")
    for name, text in value.items():
        if not _ENV_NAME.fullmatch(name) or len(name) > MAX_ENV_NAME:
            raise ValueError(
                f"env name {name!r}: letters, digits and _ (not starting with a digit), at most "
                f"{MAX_ENV_NAME} characters"
            )
        if len(text) > MAX_ENV_VALUE:
            raise ValueError(f"env {name!r}: a value of at most {MAX_ENV_VALUE} characters")
        if "\x00" in text:
            raise ValueError(f"env {name!r}: the value has a NUL character")
    return value


class TransformationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, max_length=WEBHOOK_NAME_MAX,
        description="Lowercase words of a-z and 0-9 joined by single hyphens.",
    )  # fmt: skip
    code: str = Field(min_length=1, description=_CODE_DOC)
    env: dict[str, str] | None = Field(default=None, description=_ENV_DOC)

    _env = field_validator("env")(_check_env)


class TransformationUpdate(BaseModel):
    """Only the fields sent change; ``version`` moves up by one when ``code`` or ``env``
    does. ``env`` replaces the stored map (``{}`` or null removes every name; a value sent as
    the mask keeps the stored one). ``code`` cannot be null; the name cannot change."""

    model_config = ConfigDict(extra="forbid")

    code: str | None = Field(default=None, min_length=1, description=_CODE_DOC)
    env: dict[str, str] | None = Field(default=None, description=_ENV_DOC)

    _env = field_validator("env")(_check_env)

    @field_validator("code")
    @classmethod
    def _not_null(cls, value: str | None) -> str:
        if value is None:
            raise ValueError("may not be null")
        return value


class TransformationRead(BaseModel):
    id: str
    username: str
    name: str
    code: str
    env: dict[str, str] = Field(description=f"Every value reads as {SECRET_MASK!r}.")
    version: int = Field(description="1 when created; one more on every change of code or env.")
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, t: Transformation) -> TransformationRead:
        return cls(
            id=t.id, username=t.username, name=t.name, code=t.code,
            env={name: SECRET_MASK for name in t.env}, version=t.version,
            created_at=t.created_at, updated_at=t.updated_at,
        )  # fmt: skip


class RequestBody(BaseModel):
    """A request as a transformation sees it (docs/owners/transformations.md)."""

    model_config = ConfigDict(extra="forbid")

    headers: dict[str, str] = Field(default_factory=dict, description="Lower-case names.")
    body: Any = Field(default=None, description="Any JSON value; a string for a text body.")
    query: str = Field(default="", description='The query string without "?".')
    path: str = Field(default="/", description='Starts with "/".')

    def to_request(self) -> TransformRequest:
        headers = {name.lower(): value for name, value in self.headers.items()}
        return TransformRequest(headers=headers, body=self.body, query=self.query, path=self.path)

    @classmethod
    def of(cls, request: TransformRequest) -> RequestBody:
        return cls(
            headers=dict(request.headers), body=request.body, query=request.query,
            path=request.path,
        )  # fmt: skip


class TransformationTest(BaseModel):
    """What to run the transformation on: one of the caller's stored events, or a request."""

    model_config = ConfigDict(extra="forbid")

    event_id: str | None = Field(
        default=None, max_length=64,
        description="One of your events (evt_…): its headers, body, query string and path.",
    )  # fmt: skip
    request: RequestBody | None = None

    @model_validator(mode="after")
    def _one_of(self) -> TransformationTest:
        if (self.event_id is None) == (self.request is None):
            raise ValueError("send either event_id or request")
        return self


class TestError(BaseModel):
    kind: str = Field(
        description="syntax, runtime, timeout, memory, invalid_output, crashed or too_large."
    )
    message: str
    line: int | None = Field(description="1-based, in your code; null when unknown.")
    column: int | None

    @classmethod
    def of(cls, error: TransformError) -> TestError:
        return cls(kind=error.kind, message=error.message, line=error.line, column=error.column)


class TransformationTestResult(BaseModel):
    request: RequestBody | None = Field(description="What the handler returned; null on error.")
    logs: list[str] = Field(description="What console printed, in order (bounded).")
    error: TestError | None
    duration_ms: float

    @classmethod
    def of(cls, result: TransformResult) -> TransformationTestResult:
        returned = result.request if result.ok else None
        return cls(
            request=RequestBody.of(returned) if returned is not None else None,
            logs=list(result.logs),
            error=TestError.of(result.error) if result.error is not None else None,
            duration_ms=round(result.duration_ms, 3),
        )

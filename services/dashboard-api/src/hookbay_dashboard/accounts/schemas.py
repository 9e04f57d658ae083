"""Bodies of ``/tokens`` and ``/admin/users``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hookbay_common.models import ApiToken, Role, User
from hookbay_dashboard.schemas import Timestamp


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="api", min_length=1, max_length=64)


class TokenRead(BaseModel):
    id: str
    name: str
    created_at: Timestamp
    last_used_at: Timestamp | None

    @classmethod
    def of(cls, token: ApiToken) -> TokenRead:
        return cls(
            id=token.id, name=token.name, created_at=token.created_at,
            last_used_at=token.last_used_at,
        )  # fmt: skip


class TokenIssued(TokenRead):
    token: str = Field(description="The token itself; shown this once, stored only hashed.")


class UserRead(BaseModel):
    username: str
    plan: str
    role: Role
    has_password: bool
    created_at: Timestamp

    @classmethod
    def of(cls, user: User) -> UserRead:
        return cls(
            username=user.username, plan=user.plan, role=user.role,
            has_password=user.password_hash is not None, created_at=user.created_at,
        )  # fmt: skip

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


class UserCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=39)
    plan: str | None = Field(default=None, max_length=32)
    role: Role = Role.USER
    password: str | None = Field(default=None, min_length=1, max_length=1024)


class UserCreated(UserRead):
    token: str = Field(description="The user's first API token; shown this once.")


class UserUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plan: str | None = Field(default=None, max_length=32)
    role: Role | None = None
    password: str | None = Field(default=None, min_length=1, max_length=1024)

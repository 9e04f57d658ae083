"""Request and response bodies of ``/auth`` and ``/me``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hookbay_common.models import User
from hookbay_dashboard.schemas import Timestamp


class LoginRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=39)
    password: str = Field(min_length=1, max_length=1024)


class Me(BaseModel):
    username: str
    plan: str
    role: str
    created_at: Timestamp
    csrf_token: str | None = Field(
        default=None,
        description="Send as X-CSRF-Token on state-changing requests made with the session "
        "cookie; null when authenticated with an API token.",
    )

    @classmethod
    def of(cls, user: User, csrf_token: str | None) -> Me:
        return cls(
            username=user.username, plan=user.plan, role=user.role.value,
            created_at=user.created_at, csrf_token=csrf_token,
        )  # fmt: skip

"""Bodies of ``/issues``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from hookbay_common.models import Issue, IssueStatus, IssueType
from hookbay_dashboard.schemas import Timestamp


class IssueRead(BaseModel):
    id: str
    type: IssueType
    status: IssueStatus
    destination: str | None = Field(
        description="The destination it is about (delivery, disabled, backlog)."
    )
    transformation: str | None = Field(description="The transformation it is about.")
    reason: str | None = Field(
        description="What happened last: breaker, final_failure, gone, sustained_failure, ..."
    )
    first_seen_at: Timestamp
    last_seen_at: Timestamp
    count: int = Field(description="Occurrences since it was first seen.")
    sample_event_id: str | None = Field(description="An event it happened to (the latest).")
    opened_at: Timestamp = Field(description="When it was opened, or last reopened.")
    resolved_at: Timestamp | None

    @classmethod
    def of(cls, issue: Issue) -> IssueRead:
        i = issue
        return cls(
            id=i.id, type=i.type, status=i.status, destination=i.destination,
            transformation=i.transformation, reason=i.reason, first_seen_at=i.first_seen_at,
            last_seen_at=i.last_seen_at, count=i.count, sample_event_id=i.sample_event_id,
            opened_at=i.opened_at, resolved_at=i.resolved_at,
        )  # fmt: skip

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="python")

"""Bodies of the replay endpoints."""

from __future__ import annotations

from pydantic import BaseModel, Field

from hookbay_common.db import ReplayJob, ReplayJobStatus
from hookbay_dashboard.schemas import Timestamp


class ReplayAccepted(BaseModel):
    """A replay durably queued on Kafka; its attempts carry ``chain_id`` and trigger
    ``replay`` and show up under the event as the forwarder makes them."""

    event_id: str
    chain_id: str
    url: str | None = Field(
        description="The webhook's forward URL the replay goes to (null: it has none now)."
    )
    routes: list[str] = Field(
        description="The webhook's enabled routes the event is routed over again, filters "
        "re-evaluated (empty: it has none now); the new deliveries alone give the event's status.",
    )


class ReplayJobRead(BaseModel):
    id: str
    webhook_name: str
    status: ReplayJobStatus = Field(description="running, then done (or failed, with error).")
    total: int = Field(
        description="Failed events of the webhook received before the job started, counted then."
    )
    published: int = Field(
        description="Events queued for replay so far. Statuses read page by page, so it may end "
        "below total (an event replayed on its own meanwhile) or above (an event failed since). "
        "At-least-once: after a replica died mid-page, that page's events are delivered twice."
    )
    created_at: Timestamp
    finished_at: Timestamp | None
    error: str | None = Field(description="Why the job failed (e.g. the webhook was deleted).")

    @classmethod
    def of(cls, job: ReplayJob) -> ReplayJobRead:
        return cls(
            id=job.id, webhook_name=job.webhook_name, status=job.status, total=job.total,
            published=job.published, created_at=job.created_at, finished_at=job.finished_at,
            error=job.error,
        )  # fmt: skip


class ReplayPreview(BaseModel):
    """What a bulk replay of the webhook's failed events would do if started now."""

    webhook_name: str
    count: int = Field(description="Failed events of the webhook received before now.")
    url: str | None = Field(
        description="The webhook's forward URL the replays would go to (null: it has none now)."
    )
    routes: list[str] = Field(description="The enabled routes the events would be routed over.")
    running_job_id: str | None = Field(
        description="The webhook's bulk replay already running (a new one answers 409), if any."
    )

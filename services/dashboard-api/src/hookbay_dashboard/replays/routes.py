"""``POST /events/{event_id}/replay`` and the bulk replay of a webhook's failed events."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from hookbay_dashboard.deps import CurrentUser, ReplaysDep
from hookbay_dashboard.replays.schemas import ReplayAccepted, ReplayJobRead, ReplayPreview

router = APIRouter(tags=["replays"])


@router.post(
    "/events/{event_id}/replay",
    response_model=ReplayAccepted,
    status_code=status.HTTP_202_ACCEPTED,
)
async def replay_event(
    event_id: str, principal: CurrentUser, replays: ReplaysDep
) -> ReplayAccepted:
    """Deliver the event again, as a new attempt chain (trigger ``replay``) to the webhook's
    current destination; answered once Kafka holds the replay. 409 when the webhook was deleted
    or has no forward URL, or the event was rejected by its signature (never forwarded); 503
    while Kafka is unreachable."""
    return await replays.replay_event(event_id, username=principal.username)


@router.get("/webhooks/{name}/events/replay/preview", response_model=ReplayPreview)
async def preview_replay_failed(
    name: str, principal: CurrentUser, replays: ReplaysDep
) -> ReplayPreview:
    """The count a bulk replay of the webhook's failed events would publish if started now,
    to confirm before starting it. Publishes nothing. 409 without a forward URL."""
    return await replays.preview_failed(principal.username, name)


@router.post(
    "/webhooks/{name}/events/replay",
    response_model=ReplayJobRead,
    status_code=status.HTTP_202_ACCEPTED,
)
async def replay_failed_events(
    name: str, principal: CurrentUser, replays: ReplaysDep, response: Response
) -> ReplayJobRead:
    """Replay every event of the webhook that is failed and was received before now, oldest
    first, as a background job; follow it at the ``Location`` returned. At-least-once: an event
    may be replayed twice when a replica dies mid-job. 409 while another bulk replay of the
    webhook runs, or without a forward URL."""
    job = await replays.replay_failed(principal.username, name)
    response.headers["Location"] = f"/api/v1/webhooks/{name}/replays/{job.id}"
    return ReplayJobRead.of(job)


@router.get("/webhooks/{name}/replays/{job_id}", response_model=ReplayJobRead)
async def get_replay_job(
    name: str, job_id: str, principal: CurrentUser, replays: ReplaysDep
) -> ReplayJobRead:
    """A bulk replay's progress: ``published`` of ``total``, ``status`` running → done."""
    return ReplayJobRead.of(await replays.get_job(principal.username, name, job_id))

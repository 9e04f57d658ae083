"""``/webhooks/{name}/events...``, ``/events/{event_id}...`` and ``/overview``: the caller's
events. Another owner's webhook or event answers 404 exactly like a missing one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse
from pydantic import AwareDatetime

from hookbay_dashboard.deps import CurrentUser, EventsDep, SettingsDep
from hookbay_dashboard.events.schemas import (
    AttemptRead,
    EventCounts,
    EventDetail,
    EventPage,
    EventRead,
    ListenAttemptCreate,
    Overview,
    StatusFilter,
)

router = APIRouter(tags=["events"])


def page_limit(
    settings: SettingsDep,
    limit: Annotated[
        int, Query(ge=1, description="Events per page, 1 to events_page_max (100 by default).")
    ] = 50,
) -> int:
    """``limit``, refused like any other invalid parameter (422) above ``events_page_max``,
    which is a setting and so cannot sit in the static ``Query`` bounds."""
    maximum = settings.events_page_max
    if limit > maximum:
        raise RequestValidationError(
            [
                {
                    "loc": ("query", "limit"),
                    "msg": f"Input should be less than or equal to {maximum}",
                    "type": "less_than_equal",
                    "input": limit,
                    "ctx": {"le": maximum},
                }
            ]
        )
    return limit


Since = Annotated[
    AwareDatetime | None,
    Query(description="Only events received at or after this instant (ISO 8601 with an offset)."),
]
Until = Annotated[
    AwareDatetime | None,
    Query(description="Only events received before this instant (ISO 8601 with an offset)."),
]


def _attachment(filename: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{filename}"'}


@router.get("/webhooks/{name}/events", response_model=EventPage)
async def list_events(
    name: str,
    principal: CurrentUser,
    events: EventsDep,
    limit: Annotated[int, Depends(page_limit)],
    status: StatusFilter = StatusFilter.ALL,
    cursor: Annotated[
        str | None, Query(description="next_cursor of the previous page, unchanged.")
    ] = None,
    request_id: Annotated[
        str | None, Query(description="Only the event of this request (req_...).")
    ] = None,
    since: Since = None,
    until: Until = None,
    q: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description="Only events with this text in a request header (as `name: value`) or "
            "in the body (a binary body's bytes too), ignoring ASCII case. Bounded: one call "
            "searches at most 1,000 events and answers the matches found with `next_cursor` "
            "to search on, so a page may hold fewer than `limit` events, even none.",
        ),
    ] = None,
) -> EventPage:
    """The webhook's events, newest first, one page at a time. A cursor is valid only for the
    webhook, status filter and search that issued it (else 400 ``Invalid cursor``); events
    arriving while paging appear above it, never in later pages."""
    return await events.page(
        principal.username, name, status=status, limit=limit, cursor=cursor,
        request_id=request_id, since=since, until=until, q=q,
    )  # fmt: skip


@router.get("/webhooks/{name}/events/counts", response_model=EventCounts)
async def count_events(
    name: str, principal: CurrentUser, events: EventsDep, since: Since = None, until: Until = None
) -> EventCounts:
    """The webhook's events per status (the list's tabs), received in [since, until)."""
    return await events.counts(principal.username, name, since=since, until=until)


@router.get(
    "/webhooks/{name}/events/export",
    response_class=StreamingResponse,
    responses={200: {"model": list[EventRead], "description": "A JSON array, as a download."}},
)
async def export_events(
    name: str,
    principal: CurrentUser,
    events: EventsDep,
    status: StatusFilter = StatusFilter.ALL,
    since: Since = None,
    until: Until = None,
) -> StreamingResponse:
    """Every event of the webhook matching ``status``, oldest first, streamed as one JSON array
    of ``EventRead`` (the detail without attempts) as a download. Any size: the server holds
    one chunk at a time."""
    stream = await events.open_export(principal.username, name, status, since=since, until=until)
    return StreamingResponse(
        stream, media_type="application/json", headers=_attachment(stream.filename)
    )


@router.get("/events/{event_id}", response_model=EventDetail)
async def get_event(event_id: str, principal: CurrentUser, events: EventsDep) -> EventDetail:
    """The captured request, its status and every forward attempt, oldest first."""
    return await events.detail(principal.username, event_id)


@router.post(
    "/events/{event_id}/attempts", response_model=AttemptRead, status_code=status.HTTP_201_CREATED
)
async def record_listen_attempt(
    event_id: str, answer: ListenAttemptCreate, principal: CurrentUser, events: EventsDep
) -> AttemptRead:
    """Record what a developer's local app answered to ``hookbay listen`` as an attempt with
    trigger ``listen``; the event's status does not change. Sent again with the same
    (``session_id``, ``number``), it is recorded once."""
    return await events.record_listen_attempt(principal.username, event_id, answer)


@router.get(
    "/events/{event_id}/export",
    response_class=Response,
    responses={200: {"model": EventDetail, "description": "The detail, as a download."}},
)
async def export_event(event_id: str, principal: CurrentUser, events: EventsDep) -> Response:
    """``GET /events/{event_id}`` as a download named ``<event_id>.json``."""
    detail = await events.detail(principal.username, event_id)
    return Response(
        detail.model_dump_json(), media_type="application/json",
        headers=_attachment(f"{detail.id}.json"),
    )  # fmt: skip


@router.get("/overview", response_model=Overview)
async def overview(principal: CurrentUser, events: EventsDep) -> Overview:
    """Per webhook: the last 24 hours' counts and success rate, and its newest event's time;
    and the caller's 10 newest events."""
    return await events.overview(principal.username)

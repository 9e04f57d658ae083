"""``GET /webhooks/{name}/events/stream``: server-sent events of a webhook's events, resumable."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Annotated, Final

import anyio
from fastapi import APIRouter, Header, Query
from sse_starlette import EventSourceResponse, JSONServerSentEvent

from hookbay_common.clock import isoformat
from hookbay_dashboard.deps import CurrentUser, RuntimeDep, TailDep
from hookbay_dashboard.tail.service import TailItem, summarize

router = APIRouter(tags=["events"])

PING_SECONDS: Final = 15
"""Keep-alive comment interval: proxies and load balancers close connections idle for longer
(nginx and most cloud balancers: 60 s)."""
RETRY_MS: Final = 3000
"""How long a browser's ``EventSource`` waits before reconnecting (with ``Last-Event-ID``)."""
SHUTDOWN_GRACE_SECONDS: Final = 2.0
"""On server shutdown the tail stops polling and the stream ends cleanly (a final empty chunk,
so the browser reconnects to another replica) instead of being cut; within this grace, which
stays below uvicorn's graceful-shutdown timeout (10 s)."""


def _data(item: TailItem) -> object:
    if item.event is not None:
        return summarize(item.event).model_dump(mode="json")
    if item.gap is not None:
        return {"since": isoformat(item.gap.since), "cursor": item.cursor.encode()}
    return {"at": isoformat(item.cursor.at)}


async def _messages(items: AsyncIterator[TailItem]) -> AsyncIterator[JSONServerSentEvent]:
    first = True
    async for item in items:
        yield JSONServerSentEvent(
            data=_data(item),
            event=item.kind.value,
            id=item.cursor.encode(),
            retry=RETRY_MS if first else None,
        )
        first = False


@router.get(
    "/webhooks/{name}/events/stream",
    response_class=EventSourceResponse,
    responses={
        200: {
            "description": (
                "A text/event-stream. `event: event`: an event recorded since the stream's "
                "start (`data:` its EventSummary as JSON, with its status when sent); "
                "`event: status`: a later status change (retry, replay) of an event, `data:` "
                "the EventSummary; `event: gap` (`data:` `{since, cursor}`): the resume point "
                "is older than retention, so what changed after it may be gone; "
                "`event: heartbeat` (`data:` `{at}`) first, then whenever idle for the server's "
                "heartbeat interval (15 s by default). Every message's `id:` is a cursor: sent back as "
                "`Last-Event-ID` (or the `last_event_id` parameter), of any age, the stream "
                "resumes with everything recorded or changed since, events recorded late "
                "included (some maybe again: de-duplicate by event id)."
            ),
            "content": {"text/event-stream": {}},
        }
    },
)
async def stream_events(
    name: str,
    principal: CurrentUser,
    tail: TailDep,
    runtime: RuntimeDep,
    last_event_id: Annotated[str | None, Header()] = None,
    resume: Annotated[
        str | None,
        Query(
            alias="last_event_id",
            max_length=100,
            description="A cursor (an `id:` of this stream) to resume from when the client "
            "cannot send the `Last-Event-ID` header (a new browser EventSource); the header wins.",
        ),
    ] = None,
) -> EventSourceResponse:
    """Follow the webhook's events live. The webhook is checked before streaming starts
    (404 as JSON); the stream then lasts until the client disconnects or the server stops.
    Served from the database through one shared feed per webhook and replica, so any
    replica can serve any tail and more tails cost no more database reads."""
    stopping = anyio.Event()
    plan = principal.user.plan
    days = runtime.plans.get(plan).retention_days if plan in runtime.plans else None
    events = await tail.follow(
        principal.username, name, last_event_id=last_event_id or resume,
        retention=timedelta(days=days) if days is not None else None, stop=stopping, hello=True,
    )  # fmt: skip
    return EventSourceResponse(
        _messages(events), ping=PING_SECONDS,
        shutdown_event=stopping, shutdown_grace_period=SHUTDOWN_GRACE_SECONDS,
    )  # fmt: skip

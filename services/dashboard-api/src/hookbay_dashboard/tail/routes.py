"""``GET /webhooks/{name}/events/stream``: server-sent events of a webhook's new events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Final

import anyio
from fastapi import APIRouter, Header
from sse_starlette import EventSourceResponse, JSONServerSentEvent

from hookbay_common.models import EventHead
from hookbay_dashboard.deps import CurrentUser, TailDep
from hookbay_dashboard.tail.service import summarize

router = APIRouter(tags=["events"])

PING_SECONDS: Final = 15
"""Keep-alive comment interval: proxies and load balancers close connections idle for longer
(nginx and most cloud balancers: 60 s)."""
RETRY_MS: Final = 3000
"""How long a browser's ``EventSource`` waits before reconnecting (with ``Last-Event-ID``)."""
SSE_EVENT: Final = "event"
SHUTDOWN_GRACE_SECONDS: Final = 2.0
"""On server shutdown the tail stops polling and the stream ends cleanly (a final empty chunk,
so the browser reconnects to another replica) instead of being cut; within this grace, which
stays below uvicorn's graceful-shutdown timeout (10 s)."""


async def _messages(events: AsyncIterator[EventHead]) -> AsyncIterator[JSONServerSentEvent]:
    first = True
    async for event in events:
        yield JSONServerSentEvent(
            data=summarize(event).model_dump(mode="json"),
            event=SSE_EVENT,
            id=event.id,
            retry=RETRY_MS if first else None,
        )
        first = False


@router.get(
    "/webhooks/{name}/events/stream",
    response_class=EventSourceResponse,
    responses={
        200: {
            "description": (
                "A text/event-stream: one `event: event` per new event of the webhook (`id:` the "
                "event id, `data:` the event's EventSummary as JSON, sent once with the status it "
                "had when first seen), keep-alive comments every 15 s. Resumes after "
                "the `Last-Event-ID` header's event when the client reconnects."
            ),
            "content": {"text/event-stream": {}},
        }
    },
)
async def stream_events(
    name: str,
    principal: CurrentUser,
    tail: TailDep,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """Follow the webhook's new events live. The webhook is checked before streaming starts
    (404 as JSON); the stream then lasts until the client disconnects or the server stops.
    Served from the database, so any replica can serve any tail."""
    stopping = anyio.Event()
    events = await tail.follow(principal.username, name, last_event_id=last_event_id, stop=stopping)
    return EventSourceResponse(
        _messages(events), ping=PING_SECONDS,
        shutdown_event=stopping, shutdown_grace_period=SHUTDOWN_GRACE_SECONDS,
    )  # fmt: skip

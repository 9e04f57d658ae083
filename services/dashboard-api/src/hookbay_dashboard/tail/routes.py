"""``GET /webhooks/{name}/events/stream``: server-sent events of a webhook's new events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Final

import anyio
from fastapi import APIRouter, Header
from sse_starlette import EventSourceResponse, JSONServerSentEvent

from hookbay_dashboard.deps import CurrentUser, TailDep
from hookbay_dashboard.tail.service import TailItem, TailKind, summarize

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


async def _messages(items: AsyncIterator[TailItem]) -> AsyncIterator[JSONServerSentEvent]:
    first = True
    async for item in items:
        yield JSONServerSentEvent(
            data=summarize(item.event).model_dump(mode="json"),
            event=item.kind.value,
            id=item.event.id if item.kind is TailKind.EVENT else None,
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
                "event id, `data:` the event's EventSummary as JSON, with the status it had when "
                "first seen), then one `event: status` (no `id:`, `data:` the EventSummary) each "
                "time the status or latest attempt of an event shown in the last minute changes; "
                "keep-alive comments every 15 s. Resumes after the `Last-Event-ID` header's "
                "event when the client reconnects."
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
    Served from the database through one shared feed per webhook and replica, so any
    replica can serve any tail and more tails cost no more database reads."""
    stopping = anyio.Event()
    events = await tail.follow(principal.username, name, last_event_id=last_event_id, stop=stopping)
    return EventSourceResponse(
        _messages(events), ping=PING_SECONDS,
        shutdown_event=stopping, shutdown_grace_period=SHUTDOWN_GRACE_SECONDS,
    )  # fmt: skip

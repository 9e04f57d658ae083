"""Ceiling apps for ``scripts/bench.py``, served with the ingest's uvicorn settings.

    python -m uvicorn scripts.bench_apps:bare --loop uvloop --http httptools --lifespan off
    python -m uvicorn scripts.bench_apps:fastapi_app --loop uvloop --http httptools

``bare``: a raw ASGI app that drains the body and answers 200 (the server's ceiling).
``fastapi_app``: a FastAPI route on the ingest path that only reads the body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request, Response

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_MAX_BODY_CHUNKS = 100_000  # bound on the drain loop; a 1 KB body arrives in one chunk
_START: Message = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"), (b"content-length", b"2")],
}
_BODY: Message = {"type": "http.response.body", "body": b"{}"}


async def bare(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    """Drain the request body, answer 200 ``{}``. Run with ``--lifespan off``."""
    if scope["type"] != "http":
        return
    for _ in range(_MAX_BODY_CHUNKS):
        message = await receive()
        if not message.get("more_body", False):
            break
    await send(_START)
    await send(_BODY)


fastapi_app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)


@fastapi_app.post("/w/{username}/{name}")
async def read_body(request: Request, username: str, name: str) -> Response:
    """Read the body and nothing else."""
    await request.body()
    return Response(content=b"{}", status_code=200, media_type="application/json")

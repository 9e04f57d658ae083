"""The ASGI app ingest serves: the receiving route straight to its pipeline, the rest to FastAPI.

An HTTP request whose path has the receiving route's shape, ``/w/{username}/{webhook-name}``
(exactly three segments, names possibly empty: the pipeline's 400), goes straight to the receive
pipeline with any method (its 405 is the pipeline's), counted in the in-flight gauge while it is
answered. It skips FastAPI's and Starlette's layers (middleware, routing, exception handling),
which cost more CPU than the pipeline's own checks (docs/benchmarks.md, Ingest). Every other
path (health, readiness, metrics, their 404s and 405s) and the lifespan go to FastAPI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI
from prometheus_client import Gauge
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send


class FastPath:
    """``handler`` gets the request with ``path_params`` ``username`` and ``webhook_name``; it
    must answer every request itself (nothing around it renders its exceptions). ``state`` and
    ``router`` are the FastAPI app's: the app's state (``state.ingest``) and its lifespan."""

    def __init__(
        self, api: FastAPI, handler: Callable[[Request], Awaitable[Response]], in_flight: Gauge
    ) -> None:
        self.api = api
        self.state = api.state
        self.router = api.router
        self._handler = handler
        self._in_flight = in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            parts = scope["path"].split("/")
            if len(parts) == 4 and parts[1] == "w":  # empty names are the endpoint's 400
                scope["path_params"] = {"username": parts[2], "webhook_name": parts[3]}
                self._in_flight.inc()
                try:
                    response = await self._handler(Request(scope, receive, send))
                    await response(scope, receive, send)
                finally:
                    self._in_flight.dec()
                return
        await self.api(scope, receive, send)

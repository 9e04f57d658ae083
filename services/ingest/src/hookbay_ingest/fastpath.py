"""The ASGI fast path in front of FastAPI.

Pure ASGI middleware: an HTTP request whose path has the receiving route's shape,
``/w/{username}/{webhook-name}`` (exactly three segments, names possibly empty: the pipeline's 400),
goes straight to the receive pipeline with any method (its 405 is the pipeline's), counted in the
in-flight gauge while it is answered; it skips Starlette's routing and exception layers (a quarter
of the request's CPU time in the profile of ``docs/benchmarks.md``). Every other path, and the
lifespan, go on to FastAPI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from prometheus_client import Gauge
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import request_response
from starlette.types import ASGIApp, Receive, Scope, Send


class FastPath:
    """``handler`` gets the request with ``path_params`` ``username`` and ``webhook_name``; it
    must answer every request itself (nothing behind it renders its exceptions)."""

    def __init__(
        self, app: ASGIApp, handler: Callable[[Request], Awaitable[Response]], in_flight: Gauge
    ) -> None:
        self._app = app
        self._endpoint = request_response(handler)
        self._in_flight = in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            parts = scope["path"].split("/")
            if len(parts) == 4 and parts[1] == "w":  # empty names are the endpoint's 400
                scope["path_params"] = {"username": parts[2], "webhook_name": parts[3]}
                with self._in_flight.track_inprogress():
                    await self._endpoint(scope, receive, send)
                return
        await self._app(scope, receive, send)

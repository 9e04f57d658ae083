"""``/healthz``, ``/readyz`` and ``/metrics`` for a consumer process, served by uvicorn inside
the process's own event loop (the process, not uvicorn, owns the signals)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import uvicorn
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from hookbay_common.metrics import asgi_app

Checks = Callable[[], dict[str, bool]]


def create_ops_app(
    checks: Checks, registry: CollectorRegistry, healthy: Callable[[], bool] = lambda: True
) -> Starlette:
    """``/readyz``: 503 unless every check holds. ``/healthz``: 503 when ``healthy()`` is False
    (wedged beyond what the process heals by itself: restart it)."""

    async def healthz(_: Request) -> JSONResponse:
        if healthy():
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "wedged"}, status_code=503)

    async def readyz(_: Request) -> JSONResponse:
        results = checks()
        ready = all(results.values())
        return JSONResponse({"ready": ready, **results}, status_code=200 if ready else 503)

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", asgi_app(registry), methods=["GET"]),
        ]
    )


class OpsServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its host process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    @property
    def port(self) -> int | None:
        """The bound port (useful with port 0)."""
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return None


def create_ops_server(app: Starlette, host: str, port: int) -> OpsServer:
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, lifespan="off",
        loop="asyncio",
    )  # fmt: skip
    return OpsServer(config)

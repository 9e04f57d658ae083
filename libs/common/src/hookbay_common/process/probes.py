"""``/healthz``, ``/readyz`` and ``/metrics`` of a hookbay process.

- ``/healthz``: 200 ``{"status": "ok"}``, or 503 ``{"status": "wedged"}`` when ``healthy()`` is
  False (wedged beyond what the process heals by itself: restart it). A dependency being away is
  not a restart case, so readiness checks never fail liveness.
- ``/readyz``: ``{"ready": <bool>, <check>: <bool>, ...}``, 200 when every check holds, else 503.
  A draining process (``draining()`` True) is not ready whatever its checks say, and adds
  ``"draining": true``; ``reported`` checks are listed but never gate readiness.
- ``/metrics``: the registry in the Prometheus text format; GET (and HEAD) only, any other method
  405 with ``Allow``. A route, not a mount: a mount would answer ``/metrics`` with a redirect.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from hookbay_common.metrics import asgi_app

Checks = Callable[[], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]
"""Named readiness results, computed on each ``/readyz`` (plain or async)."""


def _always() -> bool:
    return True


def _never() -> bool:
    return False


async def _results(checks: Checks) -> dict[str, Any]:
    found = checks()
    return dict(await found if inspect.isawaitable(found) else found)


@dataclass(frozen=True)
class Probes:
    """What the probe endpoints ask the process: ``checks`` gate readiness, ``healthy`` is
    liveness, ``draining`` (set once a stop began) makes the process unready, ``reported``
    checks are shown on ``/readyz`` without gating it (a dependency the process fails open on)."""

    checks: Checks
    healthy: Callable[[], bool] = _always
    draining: Callable[[], bool] = _never
    reported: Checks | None = None

    async def healthz(self, _: Request) -> Response:
        if self.healthy():
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "wedged"}, status_code=503)

    async def readyz(self, _: Request) -> Response:
        results = await _results(self.checks)
        draining = self.draining()
        ready = all(results.values()) and not draining
        if draining:
            results["draining"] = True
        if self.reported is not None:
            results.update(await _results(self.reported))
        return JSONResponse({"ready": ready, **results}, status_code=200 if ready else 503)


def probe_routes(probes: Probes, registry: CollectorRegistry) -> list[BaseRoute]:
    """The three routes (each answering GET and HEAD), for a Starlette app."""
    return [
        Route("/healthz", probes.healthz),
        Route("/readyz", probes.readyz),
        _metrics_route(registry),
    ]


def _metrics_route(registry: CollectorRegistry) -> Route:
    return Route("/metrics", asgi_app(registry), methods=["GET"])


def mount_probes(app: Starlette, probes: Probes, registry: CollectorRegistry) -> None:
    """Append the probe routes to ``app``'s routes: after the routes already there, before any
    added later (a catch-all mounted last still answers the rest). In a FastAPI app (one with
    ``add_api_route``) ``/healthz`` and ``/readyz`` are its own GET routes, left out of its
    OpenAPI document: HEAD is answered 405 as on its other GET routes, and middleware sees
    them matched as FastAPI routes (``scope["route"]``), as it sees every other route."""
    add_api_route = getattr(app, "add_api_route", None)
    if add_api_route is None:
        app.router.routes.extend(probe_routes(probes, registry))
        return
    for path, endpoint in (("/healthz", probes.healthz), ("/readyz", probes.readyz)):
        add_api_route(path, endpoint, methods=["GET"], include_in_schema=False)
    app.router.routes.append(_metrics_route(registry))


def create_ops_app(
    checks: Checks, registry: CollectorRegistry, healthy: Callable[[], bool] = _always
) -> Starlette:
    """A standalone app of the three probes, for a process that serves no other HTTP."""
    return Starlette(routes=probe_routes(Probes(checks, healthy), registry))

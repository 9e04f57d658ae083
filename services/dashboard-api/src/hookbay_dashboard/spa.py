"""The dashboard SPA, served from the files ``make web`` builds into ``static/`` (package data).

- ``/assets/*``: content-hashed files, ``Cache-Control: public, max-age=31536000, immutable``;
- any other GET or HEAD outside ``/api/``, ``/healthz``, ``/readyz`` and ``/metrics``: a file of
  the build's root (``theme.js``) or else ``index.html`` with ``no-cache``, so deep links and
  reloads land in the app, which routes them (its own 404 page included);
- unknown ``/api/...`` paths keep their JSON 404 (the API's routes match first; this catch-all
  leaves them alone), and a HEAD on an API route gets the router's 405 with ``Allow``.

Every answer carries the strict Content-Security-Policy below: the app loads nothing from
another origin (no CDN, web font or telemetry) and runs no inline script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

STATIC_DIR: Final = Path(__file__).resolve().parent / "static"
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
IMMUTABLE: Final = "public, max-age=31536000, immutable"
NOT_THE_SPA: Final = ("api/", "healthz", "readyz", "metrics")


class _HashedAssets(StaticFiles):
    """``/assets``: names carry a content hash, so a browser may keep them forever."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        if response.status_code == 200:
            response.headers["Cache-Control"] = IMMUTABLE
        response.headers.update(SECURITY_HEADERS)
        return response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except StarletteHTTPException as exc:  # a missing asset is a 404, never index.html
            raise StarletteHTTPException(exc.status_code, "no such asset") from None


def _is_spa_path(path: str) -> bool:
    trimmed = path.lstrip("/")
    return not any(trimmed == p.rstrip("/") or trimmed.startswith(p) for p in NOT_THE_SPA)


def _not_the_spa(app: FastAPI, request: Request) -> Response:
    """What the router would have answered without this catch-all: 405 with ``Allow`` when a
    route has this path but not this method (a HEAD on an API GET route, which this catch-all
    takes since it serves HEAD), the redirect to the path with (or without) a trailing slash
    when that one exists (``/api/v1/webhooks/`` → ``/api/v1/webhooks``), else the JSON 404."""
    path = request.url.path
    allowed = {
        method
        for route in app.router.routes
        if getattr(route, "name", None) != "spa"
        and route.matches(request.scope)[0] is Match.PARTIAL
        for method in getattr(route, "methods", None) or ()
    }
    if allowed:
        raise StarletteHTTPException(405, headers={"Allow": ", ".join(sorted(allowed))})
    other = path[:-1] if path.endswith("/") else path + "/"
    scope = {**request.scope, "path": other}
    for route in app.router.routes:
        if getattr(route, "name", None) != "spa" and route.matches(scope)[0] is not Match.NONE:
            return RedirectResponse(request.url.replace(path=other), status_code=307)
    raise StarletteHTTPException(404, f"no route {path}")


def mount_spa(app: FastAPI, static_dir: Path = STATIC_DIR) -> None:
    """Serve the built SPA beside the API; call after the API's routes are included. Without
    a build (``make web`` not run), ``/`` answers a JSON 404 that says how to build it."""
    index = static_dir / "index.html"
    if (static_dir / "assets").is_dir():
        app.mount("/assets", _HashedAssets(directory=static_dir / "assets"), name="spa-assets")
    root_files = (
        {p.name for p in static_dir.iterdir() if p.is_file()} if static_dir.is_dir() else set()
    )

    @app.api_route("/{path:path}", methods=["GET", "HEAD"], include_in_schema=False)
    async def spa(path: str, request: Request) -> Response:
        if not _is_spa_path(request.url.path):
            return _not_the_spa(app, request)
        if not index.is_file():
            raise StarletteHTTPException(
                404, "the dashboard UI is not built: run `make web` (make run does it)"
            )
        name = path.strip("/")
        if name in root_files and name != "index.html":
            return FileResponse(
                static_dir / name, headers={"Cache-Control": "no-cache", **SECURITY_HEADERS}
            )
        return FileResponse(
            index, media_type="text/html", headers={"Cache-Control": "no-cache", **SECURITY_HEADERS}
        )

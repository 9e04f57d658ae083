"""The dashboard API: ``/api/v1`` (OpenAPI at ``/api/v1/openapi.json``) plus health, readiness
and metrics. Every error is rendered from ``hookbay_common.errors`` as ``{"error", "message",
...}``; a client mistake is a 4xx, never a 500, and no response or log carries a stack trace."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import Counter, Histogram
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from structlog.contextvars import bound_contextvars

from hookbay_common import metrics
from hookbay_common.errors import HookbayError
from hookbay_common.logs import get_logger
from hookbay_common.plans import PlanBook, load_plans
from hookbay_common.process import Probes, heap, mount_probes, report_loop_errors
from hookbay_dashboard.accounts.routes import router as accounts_router
from hookbay_dashboard.alerts.routes import router as alerts_router
from hookbay_dashboard.auth.routes import router as auth_router
from hookbay_dashboard.deliveries.routes import router as deliveries_router
from hookbay_dashboard.deps import refuse_unstorable_text
from hookbay_dashboard.destinations.routes import router as destinations_router
from hookbay_dashboard.events.routes import router as events_router
from hookbay_dashboard.issues.routes import router as issues_router
from hookbay_dashboard.replays.routes import router as replays_router
from hookbay_dashboard.routing.routes import router as routing_router
from hookbay_dashboard.runtime import Runtime
from hookbay_dashboard.settings import DashboardSettings
from hookbay_dashboard.spa import mount_spa
from hookbay_dashboard.stats.routes import router as stats_router
from hookbay_dashboard.tail.routes import router as tail_router
from hookbay_dashboard.transformations.routes import router as transformations_router
from hookbay_dashboard.webhooks.routes import router as webhooks_router

log = get_logger("hookbay.dashboard")
API_PREFIX = "/api/v1"
REQUEST_ID_HEADER = "X-Request-Id"

_ERROR_SCHEMA = {
    "type": "object",
    "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
    "required": ["error", "message"],
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "content": {"application/json": {"schema": _ERROR_SCHEMA}}}
    for code, text in [
        (400, "Invalid request (bad parameter, cursor or value)"),
        (401, "Not authenticated"),
        (403, "Forbidden (CSRF check failed, admin role required)"),
        (404, "Not found, or another owner's"),
        (409, "Conflict (name taken, destination in use, route limit)"),
        (422, "Body or parameters do not match the schema"),
        (429, "Too many requests (login throttling)"),
        (503, "A dependency (Kafka) is unreachable; retry later"),
    ]
}


class DashboardMetrics:
    def __init__(self) -> None:
        self.registry = metrics.new_registry()
        self.requests = Counter(
            metrics.name("dashboard_requests"), "Dashboard API requests by route and status",
            ["method", "route", "status"], registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            metrics.name("dashboard_request_seconds"), "Dashboard API request latency by route",
            ["route"], buckets=metrics.LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip


class _RequestContext:
    """Pure ASGI middleware: a request id per request (``X-Request-Id``, bound to every log
    line), and the request counter and latency by route template (never the raw path)."""

    def __init__(self, app: ASGIApp, metrics: DashboardMetrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (REQUEST_ID_HEADER.lower().encode(), request_id.encode()),
                ]
            await send(message)

        with bound_contextvars(request_id=request_id):
            try:
                await self._app(scope, receive, send_with_id)
            finally:
                route = _route_template(scope)
                self._metrics.requests.labels(scope["method"], route, str(status)).inc()
                self._metrics.latency.labels(route).observe(time.perf_counter() - started)


def _route_template(scope: Scope) -> str:
    """The matched route's path template (``/api/v1/webhooks/{name}``); ``unmatched`` for none.
    FastAPI keeps an included router's routes without the prefix it was included under."""
    path = getattr(scope.get("route"), "path", None)
    if not isinstance(path, str):
        return "unmatched"
    if scope["path"].startswith(API_PREFIX + "/") and not path.startswith(API_PREFIX):
        return API_PREFIX + path
    return path


def _error(exc: HookbayError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers)


def _validation_message(errors: list[Any]) -> str:
    parts = []
    for err in errors[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "the request does not match the schema"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HookbayError)
    async def hookbay_error(_: Request, exc: HookbayError) -> Response:
        if exc.status_code >= 500:
            log.warning("request_failed", status=exc.status_code, error=exc.error)
        return _error(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        body = {
            "error": "Invalid request",
            "message": _validation_message(errors),
            "detail": errors,
        }
        return JSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        body = {"error": _status_name(exc.status_code), "message": str(exc.detail)}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(ClientDisconnect)
    async def disconnected(_: Request, exc: ClientDisconnect) -> Response:
        # the client hung up while its body was read (or sent bytes the server refused
        # mid-body): its doing, not a crash, and nobody is left to read an answer
        log.info("client_disconnected")
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def crashed(_: Request, exc: Exception) -> Response:
        log.error("request_crashed", error_type=type(exc).__name__, exc_info=exc)
        return JSONResponse(
            {"error": "Internal server error", "message": "unexpected error; it was logged"},
            status_code=500,
        )


def api_router() -> APIRouter:
    """Every ``/api/v1`` route, one router per domain."""
    api = APIRouter(
        prefix=API_PREFIX, responses=ERROR_RESPONSES, dependencies=[Depends(refuse_unstorable_text)]
    )
    routers = [
        auth_router, accounts_router, webhooks_router, routing_router, destinations_router,
        tail_router, events_router, replays_router, deliveries_router, stats_router,
        issues_router, alerts_router, transformations_router,
    ]  # fmt: skip
    for router in routers:
        api.include_router(router)
    return api


def create_app(settings: DashboardSettings, plans: PlanBook | None = None) -> FastAPI:
    app_metrics = DashboardMetrics()
    runtime = Runtime(
        settings, plans or load_plans(settings.plans_file), registry=app_metrics.registry
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        report_loop_errors()
        await runtime.start()
        heap.settle()
        try:
            yield
        finally:
            await runtime.stop()

    app = FastAPI(
        title="hookbay dashboard API",
        version="1",
        lifespan=lifespan,
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=None,
    )
    app.state.runtime = runtime
    app.state.metrics = app_metrics
    install_error_handlers(app)
    app.include_router(api_router())

    mount_probes(app, Probes(runtime.checks, runtime.healthy), app_metrics.registry)
    mount_spa(app)  # last: its catch-all answers only what no route above did
    app.add_middleware(_RequestContext, metrics=app_metrics)
    return app


def _status_name(code: int) -> str:
    """The error name of a framework-raised status: "Not found", "Bad request", ... (the
    reason phrase in the sentence case of hookbay's own errors)."""
    try:
        return HTTPStatus(code).phrase.capitalize()
    except ValueError:
        return "Error"

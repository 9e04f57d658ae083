"""The ingest app: ``POST /w/{username}/{webhook-name}`` plus health, readiness and metrics.

The receiving route is a plain Starlette route (no FastAPI parameter parsing on the hot path).
Order of checks (DESIGN.md §3): header size and count → method → names → user → webhook → active
→ rate limit → declared size → protocol upgrade with a body → body (counted while streaming, as
long as declared) → signature → capture → produce (acks=all) → 200.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from http import HTTPStatus
from typing import Any

from aiokafka.errors import KafkaError
from fastapi import FastAPI
from prometheus_client import Gauge
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Receive, Scope, Send
from structlog.contextvars import bound_contextvars

from hookbay_common.clock import utcnow
from hookbay_common.db import UserRepository, WebhookRepository
from hookbay_common.db import client as db_client
from hookbay_common.errors import HookbayError, InvalidRequest, WebhookNotFound
from hookbay_common.headers import join_headers
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.logs import get_logger
from hookbay_common.metrics import asgi_app
from hookbay_common.models import Event, EventStatus, RejectedReason, User, Webhook
from hookbay_common.names import is_valid_username, is_valid_webhook_name
from hookbay_common.plans import Plan, PlanBook, load_plans
from hookbay_common.producer import ResilientProducer
from hookbay_common.ratelimit import RateLimiter, RedisRateLimiter, create_rate_limiter
from hookbay_common.secrets_box import SecretBox
from hookbay_common.wire import encode_event
from hookbay_ingest.capture import SIGNATURE_HEADER, client_ip, signature_valid
from hookbay_ingest.errors import (
    BodyIncomplete,
    HeadersTooLarge,
    InvalidPath,
    InvalidSignature,
    MethodNotAllowed,
    NoSuchPath,
    PayloadTooLarge,
    QueueUnavailable,
    RateLimited,
    UnknownUser,
    UpgradeRefused,
    WebhookInactive,
)
from hookbay_ingest.metrics import IngestMetrics
from hookbay_ingest.settings import IngestSettings
from hookbay_ingest.view import ChangeLog, ConfigView

log = get_logger("hookbay.ingest")
JSON = "application/json"


class Ingest:
    """Everything a receiving request needs, opened by the app's lifespan."""

    def __init__(self, settings: IngestSettings, plans: PlanBook) -> None:
        self.settings = settings
        self.plans = plans
        self.draining = False
        """Set on SIGTERM with a drain delay: still serving, no longer ready."""
        self.metrics = IngestMetrics()
        self.topic = settings.topics.events
        self.producer = ResilientProducer.from_settings(
            settings, name="hookbay-ingest", registry=self.metrics.registry
        )

    @property
    def kafka_connected(self) -> asyncio.Event:
        """Set once the producer first reached the broker; until then every event gets a 503."""
        return self.producer.started

    async def start(self) -> None:
        """Open the clients (inside the server's event loop) and load the configuration view."""
        settings = self.settings
        self.mongo = db_client.connect(settings.mongo_url)
        db = db_client.database(self.mongo)
        box = SecretBox(settings.secret_key.get_secret_value())
        self.view = ConfigView(
            UserRepository(db), WebhookRepository(db, box),
            ChangeLog(settings.kafka_bootstrap, settings.topics.config_spec(), box),
            self.metrics.view, settings.view_settings(),
        )  # fmt: skip
        self.limiter: RateLimiter = create_rate_limiter(settings.redis_url)
        await self.view.start()
        await self.producer.start()  # connects in the background, replaces itself when wedged

    async def stop(self) -> None:
        """Flush the producer last: every request that got a 200 is already acknowledged."""
        await self.view.stop()
        await self.producer.stop()  # flushes: waits for every pending acknowledgement
        await self.limiter.close()
        await self.mongo.close()
        log.info("ingest_stopped")

    # --- the receiving endpoint -------------------------------------------------------------

    async def receive(self, request: Request) -> Response:
        started = time.perf_counter()
        request_id = new_id(IdPrefix.REQUEST)
        with bound_contextvars(request_id=request_id):
            try:
                response = await self._receive(request, request_id)
            except ClientDisconnect:
                # the sender's doing (it hung up mid-body), not a crash: nothing was stored and
                # nobody is left to answer
                self.metrics.client_disconnects.inc()
                log.info("client_disconnected", stage="body")
                return Response(status_code=400)
            except HookbayError as exc:
                response = _error_response(exc)
                if exc.status_code >= 500:
                    log.warning("request_failed", status=exc.status_code, error=exc.error)
            except Exception:
                log.exception("request_crashed")
                response = _error_response(
                    HookbayError("unexpected error; the event was not stored", requestId=request_id)
                )
        self.metrics.requests.labels(str(response.status_code)).inc()
        self.metrics.latency.observe(time.perf_counter() - started)
        return response

    async def _receive(self, request: Request, request_id: str) -> Response:
        self._check_headers(request)
        if request.method != "POST":
            raise MethodNotAllowed(request.method)
        username = request.path_params["username"]
        name = request.path_params["webhook_name"]
        user, webhook = await self._lookup(username, name)
        await self._check_rate(user)
        body = await self._read_body(request)
        event = self._capture(request, request_id, webhook, body)
        if event.signature_valid is False:
            await self._produce(event, best_effort=True)
            raise InvalidSignature(request_id)
        await self._produce(event)
        self.metrics.body_size.observe(len(body))
        return Response(
            json.dumps({"success": True, "requestId": request_id}).encode(), media_type=JSON
        )

    async def _lookup(self, username: str, name: str) -> tuple[User, Webhook]:
        if not is_valid_username(username):
            raise InvalidPath(f"invalid username {username!r} in the path", username=username)
        if not is_valid_webhook_name(name):
            raise InvalidPath(f"invalid webhook name {name!r} in the path", webhookName=name)
        user = await self.view.user(username)
        if user is None:
            raise UnknownUser(username)
        webhook = await self.view.webhook(username, name)
        if webhook is None:
            raise WebhookNotFound(username, name)
        if not webhook.active:
            raise WebhookInactive()
        return user, webhook

    def _plan(self, user: User) -> Plan:
        if user.plan in self.plans:
            return self.plans.get(user.plan)
        return self.plans.get(
            self.plans.default
        )  # plan removed from the file: the default's limits

    async def _check_rate(self, user: User) -> None:
        plan = self._plan(user)
        try:
            decision = await self.limiter.hit(user.username, plan.rate_per_minute)
        except RedisError:
            # fail open: the limit protects capacity, it is not a correctness guarantee; an
            # intake that refused every webhook while Redis restarts would lose senders' events
            log.warning("rate_limiter_unavailable", owner=user.username)
            return
        if not decision.allowed:
            self.metrics.rate_limited.inc()
            raise RateLimited(plan.rate_label, plan.name, decision.retry_after)

    def _check_headers(self, request: Request) -> None:
        """``HeadersTooLarge`` past the header limits: what passes them fits one Kafka record
        (``IngestSettings`` checks that at start-up)."""
        raw = request.headers.raw
        size = sum(len(name) + len(value) for name, value in raw)
        settings = self.settings
        if size > settings.max_header_bytes or len(raw) > settings.max_header_count:
            raise HeadersTooLarge(
                settings.max_header_bytes, settings.max_header_count, size, len(raw)
            )

    async def _read_body(self, request: Request) -> bytes:
        """The exact body; ``PayloadTooLarge`` past the limit (declared or counted),
        ``UpgradeRefused`` for a body sent with a protocol upgrade (the HTTP parser gives such a
        body to the new protocol, so the app would see none), ``BodyIncomplete`` when fewer
        bytes came than declared. Never returns a body other than the one sent."""
        limit = self.settings.max_body_bytes
        headers = request.headers
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise InvalidRequest("Content-Length is not a number")
            if int(declared) > limit:
                raise PayloadTooLarge(limit, int(declared))
        upgrade = _requested_upgrade(headers.get("connection"), headers.get("upgrade"))
        has_body = (declared is not None and int(declared) > 0) or "transfer-encoding" in headers
        if upgrade is not None and has_body:
            raise UpgradeRefused(upgrade)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(limit, None)
            chunks.append(chunk)
        if declared is not None and size != int(declared):
            raise BodyIncomplete(int(declared), size)
        return b"".join(chunks)

    def _capture(self, request: Request, request_id: str, webhook: Webhook, body: bytes) -> Event:
        headers = join_headers(request.headers.raw)
        valid: bool | None = None
        if webhook.secret is not None:
            valid = signature_valid(
                body, webhook.secret.get_secret_value(), headers.get(SIGNATURE_HEADER)
            )
        peer = request.client.host if request.client else "unknown"
        return Event(
            id=new_id(IdPrefix.EVENT),
            request_id=request_id,
            webhook_id=webhook.id,
            username=webhook.username,
            webhook_name=webhook.name,
            client_ip=client_ip(
                peer, headers.get("x-forwarded-for"), self.settings.trusted_proxies
            ),
            request_headers=headers,
            body=body,
            content_type=headers.get("content-type"),
            signature_valid=valid,
            status=EventStatus.FAILED if valid is False else EventStatus.PENDING,
            rejected_reason=RejectedReason.INVALID_SIGNATURE if valid is False else None,
            forward_url=webhook.forward_url,
            created_at=utcnow(),
        )

    async def _produce(self, event: Event, *, best_effort: bool = False) -> None:
        """Return only once Kafka acknowledged the event (acks=all); else ``QueueUnavailable``
        (no producer running, the send failed, or no acknowledgement within
        ``produce_timeout``)."""
        started = time.perf_counter()
        try:
            async with asyncio.timeout(
                self.settings.produce_timeout
            ):  # no extra task, unlike wait_for
                await self.producer.send_and_wait(
                    self.topic, encode_event(event), key=event.username.encode()
                )
        except (KafkaError, TimeoutError) as exc:
            log.warning(
                "produce_failed", event_id=event.id, best_effort=best_effort,
                error=type(exc).__name__,
            )  # fmt: skip
            if not best_effort:
                raise QueueUnavailable() from None
            return
        self.metrics.produce_latency.observe(time.perf_counter() - started)


class _FastPath:
    """Pure ASGI middleware: ``/w/{username}/{webhook-name}`` goes straight to the endpoint,
    skipping Starlette's routing and exception layers (a quarter of the request's CPU time in the
    profile of docs/benchmarks.md); every other path and the lifespan go on to FastAPI."""

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


def _error_response(exc: HookbayError) -> Response:
    return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers)


def _requested_upgrade(connection: str | None, upgrade: str | None) -> str | None:
    """The protocol a request asks to switch to (``Connection: upgrade`` plus ``Upgrade``)."""
    if connection is None or upgrade is None:
        return None
    tokens = {token.strip().lower() for token in connection.split(",")}
    return upgrade if "upgrade" in tokens else None


async def _http_error(request: Request, exc: Exception) -> Response:
    """FastAPI's own 404 and 405 (paths other than the receiving route) in the JSON shape of
    every other error, instead of ``{"detail": ...}``."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        return _error_response(NoSuchPath(request.url.path))
    error = MethodNotAllowed.error if exc.status_code == 405 else HTTPStatus(exc.status_code).phrase
    message = (
        f"{request.method} is not allowed on {request.url.path}"
        if exc.status_code == 405
        else str(exc.detail)
    )
    return JSONResponse(
        {"error": error, "message": message}, status_code=exc.status_code, headers=exc.headers
    )


def create_app(settings: IngestSettings, plans: PlanBook | None = None) -> FastAPI:
    ingest = Ingest(settings, plans or load_plans(settings.plans_file))

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await ingest.start()
        try:
            yield
        finally:
            await ingest.stop()

    app = FastAPI(
        title="hookbay ingest", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.ingest = ingest
    app.add_exception_handler(StarletteHTTPException, _http_error)

    @app.get("/healthz")
    async def healthz() -> Response:
        if ingest.producer.healthy:  # else wedged beyond what replacing the producer fixes
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "wedged"}, status_code=503)

    @app.get("/readyz")
    async def readyz() -> Response:
        checks: dict[str, Any] = {
            "kafka": ingest.producer.ready,
            "config_view": ingest.view.caught_up,
        }
        ready = all(checks.values()) and not ingest.draining
        if ingest.draining:
            checks["draining"] = True
        if isinstance(ingest.limiter, RedisRateLimiter):
            # reported, never gating: the limiter fails open, and every replica turning unready
            # at once while Redis restarts would take intake down with it (the chaos suite's
            # Redis scenario)
            checks["redis"] = await ingest.limiter.ping()
        return JSONResponse({"ready": ready, **checks}, status_code=200 if ready else 503)

    app.add_middleware(  # every method: the 405 is ours
        _FastPath, handler=ingest.receive, in_flight=ingest.metrics.in_flight
    )
    app.router.routes.append(Route("/metrics", asgi_app(ingest.metrics.registry), methods=["GET"]))
    return app

"""The receive pipeline: ``POST /w/{username}/{webhook-name}`` from request to answer.

Order of checks (docs/owners/receiving.md): header size and count → method → names →
user → webhook → active → rate limit → declared size → protocol upgrade with a body → body
(counted while streaming, as long as declared) → verification (the webhook's check,
``hookbay_ingest.verification``: a handshake first, when its scheme has one, else the signature)
→ capture → produce (acks=all) → 200.

- ``GET`` is accepted only by a webhook whose scheme has a GET handshake (Meta, X); for any
  other (and for a name that is not such a webhook) it is the 405 every other method gets.
- A 200 is answered only once Kafka acknowledged the event.
- A request whose verification fails in ``enforce`` mode is still captured, as a failed event
  (``rejected_reason: invalid_signature``), produced best effort, and answered 401 with the
  reason; in ``record`` mode it is accepted and forwarded, the verdict on the event.
- A handshake is answered as its sender expects once it proved authentic, recorded as an event
  with ``handshake`` set (never forwarded); one that is not authentic is refused like a request
  with a bad signature, in either mode.
- A check that fails raises its ``hookbay_ingest.errors`` error, rendered by
  ``hookbay_ingest.rendering``; a sender that hangs up mid-body gets an empty 400; anything else
  is a bug: logged with its stack, answered 500 with only the request id.
- Every answer is counted by status and timed; every log line carries the request id.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from aiokafka.errors import KafkaError
from redis.exceptions import RedisError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from structlog.contextvars import bound_contextvars

from hookbay_common.clock import utcnow
from hookbay_common.errors import HookbayError, InvalidRequest, WebhookNotFound
from hookbay_common.headers import join_headers
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.logs import get_logger
from hookbay_common.models import (
    Event,
    EventStatus,
    EventVerification,
    HandshakeKind,
    InvalidReason,
    RejectedReason,
    User,
    VerificationMode,
    Webhook,
)
from hookbay_common.names import is_valid_username, is_valid_webhook_name
from hookbay_common.plans import Plan, PlanBook
from hookbay_common.producer import ResilientProducer
from hookbay_common.ratelimit import RateLimiter
from hookbay_common.wire import encode_event
from hookbay_ingest.capture import client_ip
from hookbay_ingest.errors import (
    BodyIncomplete,
    HeadersTooLarge,
    InvalidPath,
    InvalidSignature,
    MethodNotAllowed,
    PayloadTooLarge,
    QueueUnavailable,
    RateLimited,
    UnknownUser,
    UpgradeRefused,
    WebhookInactive,
)
from hookbay_ingest.metrics import IngestMetrics
from hookbay_ingest.rendering import crash_response, disconnect_response, error_response
from hookbay_ingest.settings import IngestSettings
from hookbay_ingest.verification import (
    Clock,
    HandshakeAnswer,
    SignedRequest,
    VerifierRegistry,
    WebhookCheck,
)
from hookbay_ingest.view import ConfigView

log = get_logger("hookbay.ingest")
JSON = "application/json"


class ReceivePipeline:
    """Answers receiving requests with the clients the app opened (``hookbay_ingest.app``);
    ``clock`` stamps events and is what verifiers are given as now."""

    def __init__(
        self,
        settings: IngestSettings,
        plans: PlanBook,
        metrics: IngestMetrics,
        producer: ResilientProducer,
        view: ConfigView,
        limiter: RateLimiter,
        *,
        verifiers: VerifierRegistry | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self.settings = settings
        self.plans = plans
        self.metrics = metrics
        self.producer = producer
        self.topic = settings.topics.events
        self.view = view
        self.limiter = limiter
        self.verifiers = verifiers or VerifierRegistry()
        self.clock = clock

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
                return disconnect_response()
            except HookbayError as exc:
                response = error_response(exc)
                if exc.status_code >= 500:
                    log.warning("request_failed", status=exc.status_code, error=exc.error)
            except Exception:
                log.exception("request_crashed")
                response = crash_response(request_id)
        self.metrics.requests.labels(str(response.status_code)).inc()
        self.metrics.latency.observe(time.perf_counter() - started)
        return response

    async def _receive(self, request: Request, request_id: str) -> Response:
        self._check_headers(request)
        method = request.method
        if method != "POST" and method != "GET":
            raise MethodNotAllowed(method)
        username = request.path_params["username"]
        name = request.path_params["webhook_name"]
        if method == "GET":
            user, webhook, handshake_check = await self._lookup_handshake(username, name)
            check: WebhookCheck | None = handshake_check
        else:
            user, webhook = await self._lookup(username, name)
            check = self.verifiers.for_webhook(webhook)
        await self._check_rate(user)
        body = await self._read_body(request)
        headers = join_headers(request.headers.raw)
        now = self.clock()
        query = request.scope.get("query_string", b"").decode("latin-1")  # byte for byte
        verdict = self._verify(request, check, headers, body, query, now)
        event = self._capture(request, request_id, webhook, headers, body, query, verdict, now)
        if verdict.refused is not None:
            await self._produce(event, best_effort=True)
            raise InvalidSignature(request_id, verdict.refused)
        await self._produce(event)
        self.metrics.body_size.observe(len(body))
        if verdict.reply is not None:
            return _handshake_response(verdict.reply)
        return Response(
            json.dumps({"success": True, "requestId": request_id}).encode(), media_type=JSON
        )

    async def _lookup_handshake(
        self, username: str, name: str
    ) -> tuple[User, Webhook, WebhookCheck]:
        """The webhook a GET is for, when its scheme has a GET handshake; anything else is the
        405 a GET always got (whether the name exists is not revealed by the method)."""
        if not is_valid_username(username) or not is_valid_webhook_name(name):
            raise MethodNotAllowed("GET")
        user = await self.view.user(username)
        webhook = await self.view.webhook(username, name) if user is not None else None
        check = self.verifiers.for_webhook(webhook) if webhook is not None else None
        if user is None or webhook is None or check is None or not check.accepts("GET"):
            raise MethodNotAllowed("GET")
        if not webhook.active:
            raise WebhookInactive()
        return user, webhook, check

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

    def _capture(
        self, request: Request, request_id: str, webhook: Webhook, headers: dict[str, str],
        body: bytes, query: str, verdict: Verdict, now: datetime,
    ) -> Event:  # fmt: skip
        peer = request.client.host if request.client else "unknown"
        rejected = verdict.refused is not None
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
            signature_valid=verdict.signature_valid,
            status=EventStatus.FAILED if rejected else EventStatus.PENDING,
            rejected_reason=RejectedReason.INVALID_SIGNATURE if rejected else None,
            forward_url=webhook.forward_url,
            routed=bool(webhook.enabled_routes),
            query=query or None,
            created_at=now,
            verification=verdict.record,
            handshake=verdict.handshake,
        )

    def _verify(
        self, request: Request, check: WebhookCheck | None, headers: dict[str, str],
        body: bytes, query: str, now: datetime,
    ) -> Verdict:  # fmt: skip
        """The webhook's check on the request: a handshake's answer when the request is one,
        else its verifier's verdict (``UNVERIFIED`` for a webhook that verifies nothing)."""
        if check is None:
            return UNVERIFIED
        signed = SignedRequest(body, headers, query, request.method)
        secrets = check.secrets_at(now)
        clock = _frozen(now)  # one reading of the clock per request (it costs µs)
        if check.handshake is not None:
            kind = check.handshake.detect(signed)
            if kind is not None:
                answer = check.handshake.answer(kind, signed, secrets, clock)
                return _handshake_verdict(check, kind, answer)
        if request.method != "POST":  # a GET that is no handshake: what a GET always got
            raise MethodNotAllowed(request.method)
        if check.verifier is None:
            return Verdict(None, check.records[None])
        verification = check.verifier.verify(signed, secrets, clock)
        refused = verification.reason
        if refused is not None and check.mode is VerificationMode.RECORD:
            refused = None
        return Verdict(verification.valid, check.records[verification], refused)

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


@dataclass(frozen=True, slots=True)
class Verdict:
    """What verification decided for one request: the event's ``signature_valid`` and
    ``verification``; ``refused``: the reason it is answered 401; for a handshake, its kind and,
    once authentic, the reply."""

    signature_valid: bool | None
    record: EventVerification | None
    refused: InvalidReason | None = None
    handshake: HandshakeKind | None = None
    reply: HandshakeAnswer | None = None


UNVERIFIED: Final = Verdict(None, None)


def _handshake_verdict(
    check: WebhookCheck, kind: HandshakeKind, answer: HandshakeAnswer
) -> Verdict:
    verification = answer.verification
    record = check.records[verification]
    if verification is not None and verification.reason is not None:
        return Verdict(False, record, verification.reason, kind)  # refused in either mode
    return Verdict(None if verification is None else True, record, None, kind, answer)


def _handshake_response(answer: HandshakeAnswer) -> Response:
    # nosniff: a challenge echoed back is never interpreted as markup by a browser
    return Response(
        answer.body, media_type=answer.media_type, headers={"X-Content-Type-Options": "nosniff"}
    )


def _frozen(now: datetime) -> Clock:
    return lambda: now


def _requested_upgrade(connection: str | None, upgrade: str | None) -> str | None:
    """The protocol a request asks to switch to (``Connection: upgrade`` plus ``Upgrade``)."""
    if connection is None or upgrade is None:
        return None
    tokens = {token.strip().lower() for token in connection.split(",")}
    return upgrade if "upgrade" in tokens else None

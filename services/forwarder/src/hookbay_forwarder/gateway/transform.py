"""The transform step of a routed delivery: the route's transformation, run on the request
of each attempt in the sandbox, before the destination's lane sends it.

Where it runs (``docs/decisions.md``, "Transformations on routes"): in the destination's lane,
as part of an attempt, never in the router. The router reads events in partition order, so a
transformation spinning there would hold every owner whose events share the partition; a lane
holds one destination's tasks, and its slots are that owner's. The JavaScript itself runs in
the sandbox's worker processes (``hookbay_sandbox.TransformPool``, started by the first call:
a forwarder whose routes run none starts no worker), at most half the pool per owner, so an
owner whose code spins to its CPU limit waits behind its own calls only.

``TransformStep.prepare(task)`` answers, for the task's route:

- ``None``: the route runs no transformation: the task is sent as it is (``applies`` tells
  the caller so first, with one set lookup in the routing view and no await, for a webhook
  none of whose routes runs one);
- ``Transformed``: the request to send instead (``Transformed.apply``) and its ``trace`` (the
  transformation's name and version, the SHA-256 of the body sent, the console output);
- ``TransformFailed``: the delivery ends ``transform_failed`` with its ``reason`` and trace.
  Nothing is sent; it is not retried and the destination's breaker hears nothing of it.

The request a transformation sees is the event as received (``request_of_event``) on every
attempt, retries included; the transformation's current version runs, so a retry after a fix
sends the fixed request.

Suspension: ``suspend_after`` (5) failures of one transformation in a row, at one version and
in this process, suspend it: its routes' deliveries end ``transform_failed`` with reason
``suspended`` without running it, and an issue of type ``transformation`` is opened for its
owner. A new version (``changed``, on the change log; or met by a lookup) resumes it and
resolves the issue. Failures that are not the code's (``crashed``, ``too_large``) do not count.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import urlsplit, urlunsplit

from pymongo.errors import PyMongoError

from hookbay_common.alerts import IssueTracker
from hookbay_common.clock import utcnow
from hookbay_common.logs import get_logger
from hookbay_common.models import (
    Delivery,
    DeliveryStatus,
    DeliveryTask,
    Event,
    IssueType,
    Transformation,
    TransformTrace,
)
from hookbay_common.routing.tasks import DestinationTask
from hookbay_common.topics import Topics
from hookbay_common.wire import encode_delivery
from hookbay_forwarder.delivery.consumer import TryAgainLater
from hookbay_forwarder.metrics import TransformMetrics
from hookbay_forwarder.writes import Message
from hookbay_sandbox import (
    TransformError,
    TransformPool,
    TransformRequest,
    TransformResult,
    request_of_event,
)

log = get_logger("hookbay.forwarder.transform")

SUSPEND_AFTER: Final = 5
"""Failures in a row (of one transformation, at one version) that suspend it."""
SUSPENDED: Final = "suspended"
"""The ``reason`` of a delivery whose transformation is suspended."""
PARSE_IN_THREAD_BYTES: Final = 64 * 1024
"""Bodies above this are checked for JSON in a thread, off the event loop."""
LOOKUP_BACKOFF_MIN: Final = 0.5
LOOKUP_BACKOFF_MAX: Final = 5.0
_NOT_THE_CODES: Final = frozenset({"crashed", "too_large"})


class TransformLookup(Protocol):
    """What the step reads of the configuration (``RoutingView``)."""

    def may_transform(self, username: str, webhook: str) -> bool: ...

    async def route_transform(self, username: str, webhook: str, route: str) -> str | None: ...

    async def transformation(self, username: str, name: str) -> Transformation | None: ...


class Runner(Protocol):
    """Runs one call (``TransformPool.run``'s contract)."""

    async def run(
        self, owner: str, code: str, request: TransformRequest, env: Mapping[str, str]
    ) -> TransformResult: ...


class LazyPool:
    """A ``TransformPool`` (from ``factory``) started by the first call, closed by ``close``.
    A pool that cannot start (its workers fail to come up) is tried again after a back-off,
    for as long as it takes: the calls wait, as deliveries wait for a store that is away."""

    def __init__(self, factory: Callable[[], TransformPool] = TransformPool) -> None:
        self._factory = factory
        self._pool: TransformPool | None = None
        self._starting = asyncio.Lock()

    @property
    def started(self) -> bool:
        return self._pool is not None

    async def run(
        self, owner: str, code: str, request: TransformRequest, env: Mapping[str, str]
    ) -> TransformResult:
        if self._pool is None:
            async with self._starting:
                delay = LOOKUP_BACKOFF_MIN
                while self._pool is None:
                    pool = self._factory()
                    try:
                        await pool.start()
                    except Exception as exc:  # a worker that did not come up, however
                        await pool.close()
                        log.warning("sandbox_start_failed", error=type(exc).__name__)
                        await asyncio.sleep(delay)
                        delay = min(LOOKUP_BACKOFF_MAX, delay * 2)
                        continue
                    self._pool = pool
        return await self._pool.run(owner, code, request, env)

    async def close(self) -> None:
        async with self._starting:
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


@dataclass(frozen=True, slots=True)
class Transformed:
    """The request a transformation returned, ready to send: ``headers`` and ``body`` replace
    the event's; ``path`` and ``query`` are what the handler returned, sent only when it changed
    them (``received_path``, ``received_query``: what it was given)."""

    headers: dict[str, str]
    body: bytes
    path: str
    query: str
    received_path: str
    received_query: str
    trace: TransformTrace

    def apply(self, request: DeliveryTask) -> DeliveryTask:
        """``request`` (to the destination's URL) carrying this request instead of the event's:
        its headers and body, and its path (appended to the URL's) and query (added to the
        URL's) when the handler changed them."""
        event = request.event.model_copy(
            update={"request_headers": self.headers, "body": self.body}
        )
        url = request.url
        if (self.path, self.query) != (self.received_path, self.received_query):
            url = _url_with(url, self.path if self.path != self.received_path else None,
                            self.query if self.query != self.received_query else None)  # fmt: skip
        return request.model_copy(update={"event": event, "url": url})


@dataclass(frozen=True, slots=True)
class TransformFailed:
    reason: str
    trace: TransformTrace

    def record(self, task: DestinationTask, destination: str, topics: Topics) -> Message:
        """The ``transform_failed`` delivery record, in the task's chain."""
        event = task.event
        delivery = Delivery(
            id=task.delivery_id, event_id=event.id, webhook_id=event.webhook_id,
            username=event.username, route=task.route, destination=destination,
            status=DeliveryStatus.TRANSFORM_FAILED, reason=self.reason, at=utcnow(),
            chain=task.chain_id, transform=self.trace,
        )  # fmt: skip
        return Message(topics.attempts, encode_delivery(delivery), event.id.encode())


class TransformStep:
    """See the module docstring. ``issues`` (none: no issue is opened) hears of suspensions
    and resumptions, in the background; ``close`` waits for what is under way."""

    def __init__(
        self,
        view: TransformLookup,
        runner: Runner,
        *,
        issues: IssueTracker | None = None,
        suspend_after: int = SUSPEND_AFTER,
        metrics: TransformMetrics | None = None,
    ) -> None:
        self._view = view
        self._runner = runner
        self._issues = issues
        self._metrics = metrics
        self._suspend_after = suspend_after
        self._failures: dict[tuple[str, str], tuple[int, int]] = {}
        """(owner, name) -> (version, failures in a row at that version)."""
        self._suspended: dict[tuple[str, str], int] = {}
        """(owner, name) -> the version suspended."""
        self._background: set[asyncio.Task[None]] = set()

    def applies(self, task: DestinationTask) -> bool:
        """Whether ``task``'s route may run a transformation (``prepare`` then says): false,
        without an await, for a webhook none of whose routes runs one."""
        return self._view.may_transform(task.event.username, task.event.webhook_name)

    def suspended(self, username: str, name: str) -> int | None:
        """The suspended version of the owner's transformation ``name``, if it is."""
        return self._suspended.get((username, name))

    async def prepare(self, task: DestinationTask) -> Transformed | TransformFailed | None:
        """What to send for ``task`` (see the module docstring). The configuration unreadable
        (a read-through with MongoDB away) is waited out, with a back-off: sending the event
        untransformed could send what the transformation exists to remove."""
        event = task.event
        delay = LOOKUP_BACKOFF_MIN
        while True:
            try:
                name = await self._view.route_transform(
                    event.username, event.webhook_name, task.route
                )
                if name is None:
                    return None
                transformation = await self._view.transformation(event.username, name)
                break
            except TryAgainLater:
                await asyncio.sleep(delay)
                delay = min(LOOKUP_BACKOFF_MAX, delay * 2)
        if transformation is None:
            trace = TransformTrace(name=name)
            return TransformFailed(f"transformation {name!r} no longer exists", trace)
        key = (event.username, name)
        if key in self._suspended:
            if self._suspended[key] == transformation.version:
                self._count("suspended")
                return TransformFailed(
                    SUSPENDED, TransformTrace(name=name, version=transformation.version)
                )
            self._resume(key)
        request = await _request_off_loop(event)
        env = {k: v.get_secret_value() for k, v in transformation.env.items()}
        result = await self._runner.run(event.username, transformation.code, request, env)
        if self._metrics is not None:
            self._metrics.duration.observe(result.duration_ms / 1000)
        if not result.ok or result.request is None:
            self._count("failed")
            return self._failed(task, transformation, result)
        self._count("ok")
        self._failures.pop(key, None)
        return _transformed(request, result.request, transformation, result.logs)

    def changed(self, transformation: Transformation) -> None:
        """A transformation entered the routing view or changed in it: a new version of a
        suspended one resumes it."""
        key = (transformation.username, transformation.name)
        suspended = self._suspended.get(key)
        if suspended is not None and suspended != transformation.version:
            self._resume(key)

    async def close(self) -> None:
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    def _count(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.calls.labels(outcome).inc()

    def _held_suspended(self) -> None:
        if self._metrics is not None:
            self._metrics.suspended.set(len(self._suspended))

    def _failed(
        self, task: DestinationTask, transformation: Transformation, result: TransformResult
    ) -> TransformFailed:
        error = result.error or TransformError("invalid_output", "the handler returned nothing")
        trace = TransformTrace(
            name=transformation.name, version=transformation.version, logs=tuple(result.logs)
        )
        failed = TransformFailed(describe(error), trace)
        if error.kind in _NOT_THE_CODES:
            return failed
        key = (task.event.username, transformation.name)
        version, count = self._failures.get(key, (transformation.version, 0))
        count = count + 1 if version == transformation.version else 1
        self._failures[key] = (transformation.version, count)
        if count >= self._suspend_after:
            self._suspend(key, transformation.version, task.event.id)
        return failed

    def _suspend(self, key: tuple[str, str], version: int, event_id: str) -> None:
        self._suspended[key] = version
        self._failures.pop(key, None)
        self._held_suspended()
        log.warning("transformation_suspended", username=key[0], transformation=key[1],
                    version=version)  # fmt: skip
        if self._issues is not None:
            issues = self._issues
            self._later(issues.occurred(
                key[0], IssueType.TRANSFORMATION, transformation=key[1], event_id=event_id,
                reason=SUSPENDED,
            ))  # fmt: skip

    def _resume(self, key: tuple[str, str]) -> None:
        self._suspended.pop(key, None)
        self._failures.pop(key, None)
        self._held_suspended()
        log.info("transformation_resumed", username=key[0], transformation=key[1])
        if self._issues is not None:
            issues = self._issues
            self._later(issues.clear(key[0], IssueType.TRANSFORMATION, transformation=key[1]))

    def _later(self, work: Any) -> None:
        async def guarded() -> None:
            try:
                await work
            except (PyMongoError, RuntimeError) as exc:  # the issue is a notice: deliveries go on
                log.warning("transformation_issue_failed", error=type(exc).__name__)

        task = asyncio.create_task(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def describe(error: TransformError) -> str:
    """A failure as a delivery's ``reason``: its kind, its message, where in the code."""
    where = f" (line {error.line}, column {error.column})" if error.line is not None else ""
    return f"{error.kind}: {error.message}{where}"


async def _request_off_loop(event: Event) -> TransformRequest:
    if len(event.body) > PARSE_IN_THREAD_BYTES:
        return await asyncio.to_thread(request_of_event, event)
    return request_of_event(event)


def _transformed(
    given: TransformRequest,
    returned: TransformRequest,
    transformation: Transformation,
    logs: list[str],
) -> Transformed:
    body_json = returned.body_json
    text = body_json.startswith('"')
    body = (json.loads(body_json) if text else body_json).encode()
    # names lower case, as the event's (the destination's headers replace them by name);
    # values sent as UTF-8 bytes (the deliverer writes them as latin-1 text)
    headers = {n.lower(): v.encode().decode("latin-1") for n, v in returned.headers.items()}
    if not text and "content-type" not in headers:
        headers["content-type"] = "application/json"
    trace = TransformTrace(
        name=transformation.name, version=transformation.version,
        body_sha256=hashlib.sha256(body).hexdigest(), logs=tuple(logs),
    )  # fmt: skip
    return Transformed(headers, body, returned.path, returned.query, given.path, given.query,
                       trace)  # fmt: skip


def _url_with(url: str, path: str | None, query: str | None) -> str:
    parts = urlsplit(url)
    new_path = parts.path.rstrip("/") + path if path is not None else parts.path
    new_query = "&".join(q for q in (parts.query, query) if q) if query is not None else parts.query
    return urlunsplit(parts._replace(path=new_path, query=new_query))

"""Replays: one event at once, or every failed event of a webhook as a background job.

A replay goes where the webhook delivers *now*: to the ``forward_url`` of a webhook stored
before ``forward_url`` became a route (not yet migrated), a ``DeliveryTask`` with trigger ``replay`` (the forwarder runs it as a new attempt chain and the recorder makes the
event's status follow it); over its enabled routes, a route request (``wire.encode_route_request``)
that the forwarder's router routes again, filters re-evaluated, as a new routing whose
deliveries alone give the event's status. Both are published on ``Topics.replays`` keyed by the
event id, under one chain id. Events rejected by their signature are never replayed (they were
never forwarded, on purpose).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from aiokafka.errors import KafkaError
from pymongo.errors import PyMongoError
from structlog.contextvars import bound_contextvars

from hookbay_common.clock import utcnow
from hookbay_common.db import (
    EventRepository,
    ReplayJob,
    ReplayJobRepository,
    ReplayJobStatus,
    WebhookRepository,
)
from hookbay_common.db.forwarding import FORWARD_ROUTE
from hookbay_common.errors import (
    EventNotFound,
    EventRejected,
    NothingToDeliverTo,
    ReplayAlreadyRunning,
    ReplayJobNotFound,
    ServiceUnavailable,
)
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.logs import get_logger
from hookbay_common.models import DeliveryTask, Event, Webhook
from hookbay_common.producer import ResilientProducer
from hookbay_common.topics import Topics
from hookbay_common.wire import encode_route_request, encode_task
from hookbay_dashboard.replays.schemas import ReplayAccepted, ReplayPreview

log = get_logger("hookbay.dashboard.replays")

PUBLISH_TIMEOUT: Final = 10.0
"""Seconds to wait for the broker's acknowledgements before answering 503."""
RETRY_AFTER: Final = 5
POLL_INTERVAL: Final = 5.0
"""Seconds between two looks of a runner for jobs whose lease expired."""
LEASE: Final = 30.0
"""Seconds a job stays with its replica without a renewal (one renewal per page)."""
PAGE_SIZE: Final = 100
"""Events published per page of a bulk replay (and per renewal of its lease)."""


def _unavailable(message: str) -> ServiceUnavailable:
    error = ServiceUnavailable(message, retryAfter=RETRY_AFTER)
    error.headers["Retry-After"] = str(RETRY_AFTER)
    return error


class ReplayPublisher:
    """Publishes replay tasks on ``topics.replays``, keyed by event id (one event's replays keep
    their order), and returns only once the broker acknowledged every one (acks=all).

    ``producer`` returns the started producer or raises ``ServiceUnavailable`` (the dashboard's
    ``Runtime.require_kafka``); a refused or unacknowledged write is ``ServiceUnavailable`` too.
    After a failure some of the tasks may be on Kafka already: retrying publishes them again."""

    def __init__(
        self,
        producer: Callable[[], ResilientProducer],
        topics: Topics,
        *,
        timeout: float = PUBLISH_TIMEOUT,
    ) -> None:
        self._producer = producer
        self.topics = topics
        self._timeout = timeout

    def ready(self) -> None:
        """``ServiceUnavailable`` while the broker is unreachable."""
        self._producer()

    async def publish(self, replays: Sequence[Replay]) -> None:
        topic = self.topics.replays
        await self.send(
            [
                (topic, replay.event.id.encode(), value)
                for replay in replays
                for value in replay.records()
            ]
        )

    async def send(self, messages: Sequence[tuple[str, bytes, bytes]]) -> None:
        """Publish each ``(topic, key, value)`` in turn; return once every one is acknowledged."""
        producer = self._producer()
        try:
            async with asyncio.timeout(self._timeout):
                sent = [
                    await producer.send(topic, value, key=key) for topic, key, value in messages
                ]
                await asyncio.gather(*sent)
        except (KafkaError, TimeoutError) as exc:
            topics = sorted({topic for topic, _, _ in messages})
            log.warning(
                "replay_publish_failed", error_type=type(exc).__name__, topic=",".join(topics)
            )
            raise _unavailable("Kafka did not acknowledge the replay; try again shortly") from None


def targets(webhook: Webhook) -> tuple[str | None, tuple[str, ...]]:
    """Where the webhook delivers now: its enabled routes' names (its ``forward_url``'s route
    among them), and the forward URL itself only for a webhook stored before ``forward_url``
    was a route (not yet migrated); ``NothingToDeliverTo`` when neither."""
    routes = tuple(route.name for route in webhook.enabled_routes)
    if webhook.forward_url is None and not routes:
        raise NothingToDeliverTo(
            f"webhook {webhook.name!r} has no forward URL and no enabled route: nothing to "
            "deliver to; set one first",
            webhookName=webhook.name,
        )
    unrouted = webhook.route(FORWARD_ROUTE) is None
    return webhook.forward_url if unrouted else None, routes


@dataclass(frozen=True)
class Replay:
    """One event's replay: to ``url`` (the webhook's ``forward_url``) and/or over ``routes``
    (the names of its enabled routes), as one chain."""

    event: Event
    chain_id: str
    url: str | None
    routes: tuple[str, ...]

    @classmethod
    def of(cls, event: Event, webhook: Webhook) -> Replay:
        """``NothingToDeliverTo`` when the webhook has neither a forward URL nor a route."""
        url, routes = targets(webhook)
        return cls(event, new_id(IdPrefix.CHAIN), url, routes)

    def records(self) -> list[bytes]:
        records = []
        if self.url is not None:
            task = DeliveryTask.replay(self.event, self.url, now=utcnow(), chain_id=self.chain_id)
            records.append(encode_task(task))
        if self.routes:
            records.append(encode_route_request(self.event, self.chain_id))
        return records


class ReplayService:
    """Replays for owners (``username``) and for the operator's CLI (``username=None``).

    ``runner``: the job runner of this process, which starts a bulk job at once; without one (a
    CLI), a bulk job is created with its lease already over and a dashboard replica adopts it
    at its next poll."""

    def __init__(
        self,
        events: EventRepository,
        webhooks: WebhookRepository,
        jobs: ReplayJobRepository,
        publisher: ReplayPublisher,
        *,
        runner: ReplayJobRunner | None = None,
    ) -> None:
        self._events = events
        self._webhooks = webhooks
        self._jobs = jobs
        self._publisher = publisher
        self._runner = runner

    async def replay_event(self, event_id: str, *, username: str | None) -> ReplayAccepted:
        """Queue a new attempt chain for the event to its webhook's current destination.

        Returns once Kafka acknowledged it. ``EventNotFound`` also for another owner's event
        (``username`` set), ``EventRejected`` for an event refused by its signature or a
        sender's handshake (answered at intake, never forwarded),
        ``NothingToDeliverTo`` when the webhook was deleted or has no forward URL now,
        ``ServiceUnavailable`` when Kafka is unreachable. Each call is a new chain: asking twice
        delivers twice."""
        event = await self._events.get(event_id)
        if event is None or (username is not None and event.username != username):
            raise EventNotFound(event_id)
        if event.rejected_reason is not None:
            raise EventRejected(event_id, event.rejected_reason.value)
        if event.handshake is not None:
            raise EventRejected(event_id, f"handshake {event.handshake.value}")
        # by id, not name: a webhook deleted and created again under the name is another one
        webhook = await self._webhooks.get_by_id(event.webhook_id)
        if webhook is None:
            raise NothingToDeliverTo(
                f"the webhook of event {event_id!r} was deleted: nothing to deliver to",
                eventId=event_id,
            )
        replay = Replay.of(event, webhook)
        await self._publisher.publish([replay])
        log.info("replay_queued", event_id=event.id, chain_id=replay.chain_id)
        return ReplayAccepted(
            event_id=event.id, chain_id=replay.chain_id, url=replay.url, routes=list(replay.routes)
        )

    async def replay_failed(self, username: str, webhook_name: str) -> ReplayJob:
        """Start a job replaying the webhook's failed events created before now (see
        ``ReplayJobRunner``). One running job per webhook: ``ReplayAlreadyRunning`` while one
        runs (two requests at the same instant may both start one). ``NothingToDeliverTo``
        without a forward URL nor an enabled route, ``ServiceUnavailable`` while Kafka is
        unreachable."""
        webhook = await self._webhooks.require(username, webhook_name)
        targets(webhook)
        self._publisher.ready()
        running = await self._jobs.running_for_webhook(webhook.id)
        if running is not None:
            raise ReplayAlreadyRunning(webhook_name, running.id)
        now = utcnow()
        runner = self._runner
        job = await self._jobs.create(
            ReplayJob(
                id=new_id(IdPrefix.REPLAY_JOB), username=username, webhook_id=webhook.id,
                webhook_name=webhook.name, namespace=self._publisher.topics.namespace,
                total=await self._jobs.count_failed(webhook.id, before=now), created_at=now,
                lease_owner=runner.owner if runner else None,
                lease_until=now + timedelta(seconds=runner.lease) if runner else now,
            )
        )  # fmt: skip
        log.info("replay_job_created", replay_job_id=job.id, total=job.total)
        if runner is not None:
            runner.submit(job)
        return job

    async def preview_failed(self, username: str, webhook_name: str) -> ReplayPreview:
        """What ``replay_failed`` would start now: how many failed events it would publish
        (counted exactly as the job counts its ``total``) and where to. Publishes nothing;
        ``NothingToDeliverTo`` without a forward URL nor an enabled route, like the replay."""
        webhook = await self._webhooks.require(username, webhook_name)
        url, routes = targets(webhook)
        running = await self._jobs.running_for_webhook(webhook.id)
        return ReplayPreview(
            webhook_name=webhook.name, count=await self._jobs.count_failed(webhook.id, before=utcnow()),
            url=url, routes=list(routes), running_job_id=running.id if running is not None else None,
        )  # fmt: skip

    async def get_job(self, username: str, webhook_name: str, job_id: str) -> ReplayJob:
        """``ReplayJobNotFound`` also for another owner's job or another webhook's."""
        job = await self._jobs.get(job_id)
        if job is None or job.username != username or job.webhook_name != webhook_name:
            raise ReplayJobNotFound(job_id)
        return job


class ReplayJobRunner:
    """Runs bulk replay jobs; one per dashboard replica, started and stopped with the app.

    A job publishes, page by page (oldest first: ``created_at``, then id), the failed events its
    webhook had before the job was created, to the webhook's destination at the time of the page;
    after each page it records its position and ``published`` and renews its lease. Every
    ``poll_interval`` the runner claims jobs of its Kafka namespace whose lease expired (their
    replica died, stopped, or hit an outage) and resumes them from the stored position; the claim
    is one atomic ``findAndModify``, so a job has one runner at a time.

    At-least-once: a replica that dies (or stalls past its lease) after publishing a page and
    before recording it leaves that page to be published again by the next runner, so those
    events are replayed twice, each time as its own chain (``published`` counts recorded pages
    only, so it counts them once). A Kafka or database failure pauses the
    job until its lease expires; a deleted webhook or a removed forward URL fails it. ``stop``
    cancels the jobs and ends their leases at once, for another replica to resume."""

    def __init__(
        self,
        jobs: ReplayJobRepository,
        webhooks: WebhookRepository,
        publisher: ReplayPublisher,
        *,
        poll_interval: float = POLL_INTERVAL,
        lease: float = LEASE,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._jobs = jobs
        self._webhooks = webhooks
        self.publisher = publisher
        self._poll_interval = poll_interval
        self.lease = lease
        self._page_size = page_size
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._running: dict[str, asyncio.Task[None]] = {}
        self._poller: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._poller = asyncio.create_task(self._poll(), name="replay-jobs-poll")

    def submit(self, job: ReplayJob) -> None:
        """Run ``job``, which this runner holds the lease of, unless it runs here already."""
        task = self._running.get(job.id)
        if task is None or task.done():
            self._running[job.id] = asyncio.create_task(self._run(job), name=f"replay-{job.id}")

    async def adopt_expired(self) -> int:
        """Claim and start every job of this namespace whose lease expired; how many."""
        adopted = 0
        while True:
            now = utcnow()
            job = await self._jobs.claim_expired(
                self.publisher.topics.namespace, self.owner, now=now,
                lease_until=now + timedelta(seconds=self.lease),
            )  # fmt: skip
            if job is None:
                return adopted
            log.info("replay_job_adopted", replay_job_id=job.id, published=job.published)
            self.submit(job)
            adopted += 1

    async def stop(self) -> None:
        tasks = [t for t in [self._poller, *self._running.values()] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(PyMongoError, TimeoutError):
            async with asyncio.timeout(2):  # a database outage must not hold up the shutdown
                await self._jobs.release(self.owner, now=utcnow())

    async def _poll(self) -> None:
        while True:
            try:
                await self.adopt_expired()
            except PyMongoError as exc:
                log.warning("replay_jobs_poll_failed", error_type=type(exc).__name__)
            await asyncio.sleep(self._poll_interval)

    async def _run(self, job: ReplayJob) -> None:
        with bound_contextvars(replay_job_id=job.id):
            try:
                current: ReplayJob | None = job
                while current is not None:
                    current = await self._page(current)
            except (ServiceUnavailable, KafkaError, PyMongoError) as exc:
                # resumed from the last recorded page once the lease expires
                log.warning("replay_job_paused", error_type=type(exc).__name__)
            except Exception as exc:
                log.exception("replay_job_crashed")
                with contextlib.suppress(PyMongoError):
                    await self._finish(
                        job, ReplayJobStatus.FAILED, f"internal error ({type(exc).__name__})"
                    )
            finally:
                self._running.pop(job.id, None)

    async def _page(self, job: ReplayJob) -> ReplayJob | None:
        """Publish the next page; the job as recorded after it, ``None`` when the job ended
        or this runner lost it."""
        webhook = await self._webhooks.get_by_id(job.webhook_id)
        if webhook is None or (webhook.forward_url is None and not webhook.enabled_routes):
            reason = (
                "was deleted"
                if webhook is None
                else "has no forward URL nor enabled route any more"
            )
            await self._finish(job, ReplayJobStatus.FAILED, f"the webhook {reason}")
            return None
        found = await self._jobs.failed_page(job, limit=self._page_size)
        events = [event for event, _ in found]
        if not events:
            await self._finish(job, ReplayJobStatus.DONE, None)
            return None
        await self.publisher.publish([Replay.of(event, webhook) for event in events])
        advanced = await self._jobs.advance(
            job.id, self.owner, last=found[-1][1], count=len(events),
            lease_until=utcnow() + timedelta(seconds=self.lease),
        )  # fmt: skip
        if advanced is None:
            log.warning("replay_job_lost", published=job.published + len(events))
        return advanced

    async def _finish(self, job: ReplayJob, status: ReplayJobStatus, error: str | None) -> None:
        if await self._jobs.finish(job.id, self.owner, status, now=utcnow(), error=error):
            log.info("replay_job_finished", status=status.value, error=error)

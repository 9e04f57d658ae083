"""The ``replay_jobs`` collection, and the keyset over the failed events a bulk replay publishes.

A job is leased: the replica running it holds ``lease_owner`` until ``lease_until`` and renews the
lease with every page it records. Every write after the claim is conditional on still holding the
lease, so a replica that lost its job (it stalled past the lease and another claimed the job) can
no longer move it.
"""

from __future__ import annotations

from contextlib import aclosing
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pymongo import ReturnDocument

from hookbay_common.db.client import Collections, Database
from hookbay_common.db.events import EventCursor, EventRepository
from hookbay_common.models import Event, EventStatus


class ReplayJobStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ReplayJob(BaseModel):
    """A bulk replay of a webhook's failed events created before ``created_at``.

    ``after_page`` / ``after_created_at`` / ``after_id`` is the position of the last event
    published (oldest first, ``hookbay_common.db.events.EventCursor``); ``published`` counts the events of the recorded pages."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    username: str
    webhook_id: str
    webhook_name: str
    namespace: str
    """The Kafka namespace whose replays topic the job publishes to; only runners of the same
    installation claim it."""
    status: ReplayJobStatus = ReplayJobStatus.RUNNING
    total: int = Field(ge=0)
    published: int = Field(default=0, ge=0)
    created_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    after_page: int | None = None
    after_created_at: datetime | None = None
    after_id: str | None = None
    lease_owner: str | None = None
    lease_until: datetime


def _to_document(job: ReplayJob) -> dict[str, Any]:
    doc = job.model_dump(mode="python", exclude={"id"})
    doc["_id"] = job.id
    doc["status"] = job.status.value
    return doc


def _from_document(doc: dict[str, Any]) -> ReplayJob:
    doc = dict(doc)
    doc["id"] = doc.pop("_id")
    return ReplayJob.model_validate(doc)


def _replayable(event: Event, before: datetime) -> bool:
    """A failed event created before ``before``; events rejected by their signature are failed
    too but never forwarded, so they are left out."""
    return event.rejected_reason is None and event.created_at < before


class ReplayJobRepository:
    def __init__(self, db: Database) -> None:
        self._jobs = db[Collections.REPLAY_JOBS]
        self._events = EventRepository(db)

    async def create(self, job: ReplayJob) -> ReplayJob:
        await self._jobs.insert_one(_to_document(job))
        return job

    async def get(self, job_id: str) -> ReplayJob | None:
        doc = await self._jobs.find_one({"_id": job_id})
        return _from_document(doc) if doc else None

    async def running_for_webhook(self, webhook_id: str) -> ReplayJob | None:
        doc = await self._jobs.find_one(
            {"webhook_id": webhook_id, "status": ReplayJobStatus.RUNNING.value}
        )
        return _from_document(doc) if doc else None

    async def claim_expired(
        self, namespace: str, owner: str, *, now: datetime, lease_until: datetime
    ) -> ReplayJob | None:
        """Take over one running job of ``namespace`` whose lease ended before ``now``.

        One atomic ``findAndModify``: when several replicas poll at once, each job goes to one."""
        doc = await self._jobs.find_one_and_update(
            {
                "namespace": namespace,
                "status": ReplayJobStatus.RUNNING.value,
                "lease_until": {"$lt": now},
            },
            {"$set": {"lease_owner": owner, "lease_until": lease_until}},
            return_document=ReturnDocument.AFTER,
        )
        return _from_document(doc) if doc else None

    async def advance(
        self,
        job_id: str,
        owner: str,
        *,
        last: EventCursor,
        count: int,
        lease_until: datetime,
    ) -> ReplayJob | None:
        """Record that the events up to ``last`` are published (``count`` more) and renew the
        lease; ``None`` when ``owner`` no longer holds the job."""
        doc = await self._jobs.find_one_and_update(
            self._held(job_id, owner),
            {
                "$set": {
                    "after_page": last.page,
                    "after_created_at": last.created_at,
                    "after_id": last.event_id,
                    "lease_until": lease_until,
                },
                "$inc": {"published": count},
            },
            return_document=ReturnDocument.AFTER,
        )
        return _from_document(doc) if doc else None

    async def finish(
        self,
        job_id: str,
        owner: str,
        status: ReplayJobStatus,
        *,
        now: datetime,
        error: str | None = None,
    ) -> bool:
        """End the job as ``done`` or ``failed``; ``False`` when ``owner`` no longer holds it."""
        result = await self._jobs.update_one(
            self._held(job_id, owner),
            {"$set": {"status": status.value, "finished_at": now, "error": error}},
        )
        return result.matched_count == 1

    async def release(self, owner: str, *, now: datetime) -> None:
        """Let the leases of ``owner``'s running jobs end ``now``, so another replica resumes
        them at its next poll instead of after the lease."""
        await self._jobs.update_many(
            {"lease_owner": owner, "status": ReplayJobStatus.RUNNING.value},
            {"$set": {"lease_until": now}},
        )

    @staticmethod
    def _held(job_id: str, owner: str) -> dict[str, Any]:
        return {"_id": job_id, "lease_owner": owner, "status": ReplayJobStatus.RUNNING.value}

    async def count_failed(self, webhook_id: str, *, before: datetime) -> int:
        """How many failed events of the webhook were created before ``before`` (a bulk replay
        started then publishes these, less those rejected by their signature, if no status
        changes meanwhile; see ``failed_page``). From the page summaries."""
        return await self._events.count_replayable(webhook_id, before)

    async def failed_page(self, job: ReplayJob, *, limit: int) -> list[tuple[Event, EventCursor]]:
        """The next ``limit`` failed events of the job's webhook created before the job, oldest
        first (arrival order), after the job's position, each with its position.

        The status is read when the page is: an event failed at the job's start that succeeded
        meanwhile (e.g. replayed on its own) is skipped, one that failed since is included."""
        start = None
        if job.after_page is not None:
            start = EventCursor(job.after_page, job.after_created_at, job.after_id)
        found: list[tuple[Event, EventCursor]] = []
        events = self._events.stream_for_webhook(
            job.webhook_id, EventStatus.FAILED, until=job.created_at, start=start
        )
        async with aclosing(events):
            async for event, position in events:
                if _replayable(event, job.created_at):
                    found.append((event, position))
                    if len(found) == limit:
                        break
        return found

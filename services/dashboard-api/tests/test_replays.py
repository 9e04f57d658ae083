"""Replays on the real stack: the dashboard publishes to Kafka, a Forwarder and a Recorder in this
process (same topic namespace) deliver to a local receiver and record the attempts in MongoDB.
Events are stored through the repositories, with a stale ``forward_url`` so that a delivery to
the webhook's current destination proves the replay used it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest

from hookbay_common.clock import utcnow
from hookbay_common.db import (
    AttemptRepository,
    Database,
    EventRepository,
    ReplayJob,
    ReplayJobRepository,
    WebhookRepository,
)
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import (
    AttemptTrigger,
    Event,
    EventStatus,
    HandshakeKind,
    RejectedReason,
    Webhook,
)
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_dashboard.accounts.service import AccountService
from hookbay_dashboard.app import create_app
from hookbay_dashboard.replays.service import ReplayJobRunner, ReplayPublisher
from hookbay_dashboard.settings import DashboardSettings
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.recorder import Recorder
from tests.support.dashboard import Dashboard, Owner, serve_dashboard
from tests.support.factories import TEST_SECRET_KEY, create_event, create_webhook, unique_name
from tests.support.forwarder import forwarder_namespace, running
from tests.support.net import free_port
from tests.support.receiver import Receiver
from tests.support.waiting import until

STALE_URL = "http://127.0.0.1:9/old-destination"


@dataclass
class Stack:
    dashboard: Dashboard
    db: Database
    receiver: Receiver
    writer: EventRepository | None = None
    """The one writer of events, as the recorder is (a writer reserves positions)."""

    @property
    def namespace(self) -> str:
        return self.dashboard.settings.kafka_namespace

    async def webhook(self, owner: Owner, forward_url: str | None) -> Webhook:
        hook = create_webhook(username=owner.username, forward_url=forward_url)
        return await self.dashboard.runtime.webhooks.create(hook)

    async def store(
        self, webhook: Webhook, statuses: Sequence[EventStatus], **overrides: Any
    ) -> list[Event]:
        """Events of ``webhook`` with ``statuses``, oldest first, 10 ms apart, an hour ago."""
        start = overrides.pop("start", utcnow() - timedelta(hours=1))
        made = [
            create_event(
                webhook_id=webhook.id,
                webhook_name=webhook.name,
                username=webhook.username,
                forward_url=STALE_URL,
                created_at=start + timedelta(milliseconds=10 * i),
                status=status,
                **overrides,
            )
            for i, status in enumerate(statuses)
        ]
        if self.writer is None:
            self.writer = EventRepository(self.db)
        events = self.writer
        await events.upsert_many(made)
        for event in made:
            if event.status is not event.initial_status:
                await events.set_status(event.id, event.status)
        return made

    async def wait_status(self, events: Sequence[Event], status: EventStatus) -> None:
        repo = EventRepository(self.db)

        async def all_there() -> bool:
            for event in events:
                found = await repo.get(event.id)
                if found is None or found.status is not status:
                    return False
            return True

        await until(all_there, 30, interval=0.2, what=f"{len(events)} events {status}")

    def delivered_ids(self, url: str) -> list[str]:
        return [r.header("x-hookbay-event-id") or "" for r in self.receiver.received(url)]


@pytest.fixture(scope="module")
async def stack(
    settings: Settings, dashboard_settings: DashboardSettings, db: Database, receiver: Receiver
) -> AsyncIterator[Stack]:
    """A dashboard, a forwarder and a recorder sharing a topic namespace of their own."""
    fs = await forwarder_namespace(settings)  # creates the namespace's topics
    ds = dashboard_settings.model_copy(update={"kafka_namespace": fs.kafka_namespace})
    async with serve_dashboard(ds) as dashboard, running(Forwarder(fs)), running(Recorder(fs)):
        yield Stack(dashboard, db, receiver)


async def job_until_done(owner: Owner, name: str, job_id: str) -> dict[str, Any]:
    body: dict[str, Any] = {}

    async def done() -> bool:
        nonlocal body
        response = await owner.client.get(f"/api/v1/webhooks/{name}/replays/{job_id}")
        assert response.status_code == 200, response.text
        body = response.json()
        return bool(body["status"] != "running")

    await until(done, 30, interval=0.1, what=f"replay job {job_id} ends")
    return body


def a_job(stack: Stack, webhook: Webhook, **overrides: Any) -> ReplayJob:
    """A job document as a replica that died would have left it: its lease over."""
    now = utcnow()
    fields: dict[str, Any] = {
        "id": new_id(IdPrefix.REPLAY_JOB), "username": webhook.username, "webhook_id": webhook.id,
        "webhook_name": webhook.name, "namespace": stack.namespace, "total": 0,
        "created_at": now, "lease_owner": "dead-replica", "lease_until": now - timedelta(seconds=1),
    }  # fmt: skip
    return ReplayJob(**{**fields, **overrides})


@pytest.fixture
async def other_replica(stack: Stack) -> AsyncIterator[ReplayJobRunner]:
    """A second runner on the same database and namespace, polling often, small pages."""
    runtime = stack.dashboard.runtime
    runner = ReplayJobRunner(
        ReplayJobRepository(stack.db), WebhookRepository(stack.db, SecretBox(TEST_SECRET_KEY)),
        ReplayPublisher(runtime.require_kafka, runtime.settings.topics),
        poll_interval=0.1, lease=5, page_size=2,
    )  # fmt: skip
    runner.start()
    yield runner
    await runner.stop()


class TestReplayEvent:
    async def test_failed_event_goes_to_the_current_destination_and_succeeds(
        self, stack: Stack
    ) -> None:
        owner = await stack.dashboard.owner()
        url = stack.receiver.url()
        hook = await stack.webhook(owner, url)
        (event,) = await stack.store(hook, [EventStatus.FAILED])

        response = await owner.client.post(f"/api/v1/events/{event.id}/replay")

        assert response.status_code == 202, response.text
        body = response.json()
        assert body["event_id"] == event.id
        assert body["url"] == url
        (delivered,) = await stack.receiver.wait_for(url, 1)
        assert delivered.body == event.body
        assert delivered.header("x-hookbay-event-id") == event.id
        await stack.wait_status([event], EventStatus.SUCCESS)
        (attempt,) = await AttemptRepository(stack.db).list_for_event(event.id)
        assert attempt.trigger is AttemptTrigger.REPLAY
        assert (attempt.chain_id, attempt.url, attempt.status_code) == (body["chain_id"], url, 200)

    async def test_another_owners_or_a_missing_event_is_404(self, stack: Stack) -> None:
        owner, stranger = await stack.dashboard.owner(), await stack.dashboard.owner()
        (event,) = await stack.store(
            await stack.webhook(owner, stack.receiver.url()), [EventStatus.FAILED]
        )
        foreign = await stranger.client.post(f"/api/v1/events/{event.id}/replay")
        missing = await owner.client.post("/api/v1/events/evt_missing/replay")
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json()["error"] == "Event not found"
        assert foreign.json().keys() == missing.json().keys()

    async def test_no_forward_url_or_a_deleted_webhook_is_409(self, stack: Stack) -> None:
        owner = await stack.dashboard.owner()
        (silent,) = await stack.store(await stack.webhook(owner, None), [EventStatus.FAILED])
        gone_hook = await stack.webhook(owner, stack.receiver.url())
        (orphan,) = await stack.store(gone_hook, [EventStatus.FAILED])
        await owner.client.delete(f"/api/v1/webhooks/{gone_hook.name}")

        no_url = await owner.client.post(f"/api/v1/events/{silent.id}/replay")
        deleted = await owner.client.post(f"/api/v1/events/{orphan.id}/replay")

        for response in (no_url, deleted):
            assert response.status_code == 409
            assert response.json()["error"] == "Nothing to deliver to"
            assert "nothing to deliver to" in response.json()["message"]

    async def test_an_event_rejected_by_its_signature_is_409(self, stack: Stack) -> None:
        owner = await stack.dashboard.owner()
        url = stack.receiver.url()
        (rejected,) = await stack.store(
            await stack.webhook(owner, url), [EventStatus.FAILED],
            rejected_reason=RejectedReason.INVALID_SIGNATURE, signature_valid=False,
        )  # fmt: skip
        response = await owner.client.post(f"/api/v1/events/{rejected.id}/replay")
        assert response.status_code == 409
        assert response.json()["rejectedReason"] == "invalid_signature"
        assert stack.receiver.received(url) == []

    async def test_a_handshake_is_409(self, stack: Stack) -> None:
        """A sender's handshake was answered at intake: it is never forwarded, replayed or not."""
        owner = await stack.dashboard.owner()
        url = stack.receiver.url()
        (handshake,) = await stack.store(
            await stack.webhook(owner, url), [EventStatus.SUCCESS],
            handshake=HandshakeKind.SLACK_URL_VERIFICATION,
        )  # fmt: skip
        response = await owner.client.post(f"/api/v1/events/{handshake.id}/replay")
        assert response.status_code == 409
        assert response.json()["rejectedReason"] == "handshake url_verification"
        assert stack.receiver.received(url) == []


class TestBulkReplay:
    async def test_replays_exactly_the_failed_events_received_before_it(self, stack: Stack) -> None:
        owner = await stack.dashboard.owner()
        url = stack.receiver.url()
        hook = await stack.webhook(owner, url)
        failed = await stack.store(hook, [EventStatus.FAILED] * 25)
        succeeded = await stack.store(hook, [EventStatus.SUCCESS] * 3)
        await stack.store(
            hook, [EventStatus.FAILED], rejected_reason=RejectedReason.INVALID_SIGNATURE
        )
        later = await stack.store(hook, [EventStatus.FAILED], start=utcnow() + timedelta(hours=1))

        response = await owner.client.post(f"/api/v1/webhooks/{hook.name}/events/replay")

        assert response.status_code == 202, response.text
        job = response.json()
        assert (job["webhook_name"], job["total"]) == (hook.name, 25)
        assert response.headers["location"] == f"/api/v1/webhooks/{hook.name}/replays/{job['id']}"
        done = await job_until_done(owner, hook.name, job["id"])
        assert (done["status"], done["published"], done["total"]) == ("done", 25, 25)
        assert done["finished_at"] is not None
        await stack.wait_status(failed, EventStatus.SUCCESS)
        assert sorted(stack.delivered_ids(url)) == sorted(e.id for e in failed)
        assert not {e.id for e in [*succeeded, *later]} & set(stack.delivered_ids(url))

    async def test_another_owners_job_is_404(self, stack: Stack) -> None:
        owner, stranger = await stack.dashboard.owner(), await stack.dashboard.owner()
        hook = await stack.webhook(owner, stack.receiver.url())
        started = await owner.client.post(f"/api/v1/webhooks/{hook.name}/events/replay")
        job_id = started.json()["id"]
        foreign = await stranger.client.get(f"/api/v1/webhooks/{hook.name}/replays/{job_id}")
        missing = await owner.client.get(f"/api/v1/webhooks/{hook.name}/replays/rpj_missing")
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json()["error"] == "Replay job not found"
        unknown_hook = await stranger.client.post(f"/api/v1/webhooks/{hook.name}/events/replay")
        assert unknown_hook.status_code == 404

    async def test_without_forward_url_is_409(self, stack: Stack) -> None:
        owner = await stack.dashboard.owner()
        hook = await stack.webhook(owner, None)
        await stack.store(hook, [EventStatus.FAILED])
        response = await owner.client.post(f"/api/v1/webhooks/{hook.name}/events/replay")
        assert response.status_code == 409
        assert response.json()["error"] == "Nothing to deliver to"

    async def test_a_second_while_one_runs_is_409(self, stack: Stack) -> None:
        owner = await stack.dashboard.owner()
        hook = await stack.webhook(owner, stack.receiver.url())
        held = a_job(stack, hook, lease_until=utcnow() + timedelta(hours=1))  # a live replica's
        await ReplayJobRepository(stack.db).create(held)
        response = await owner.client.post(f"/api/v1/webhooks/{hook.name}/events/replay")
        assert response.status_code == 409
        assert response.json()["jobId"] == held.id

    async def test_a_job_whose_replica_died_is_resumed_from_its_position(
        self, stack: Stack, other_replica: ReplayJobRunner
    ) -> None:
        owner = await stack.dashboard.owner()
        url = stack.receiver.url()
        hook = await stack.webhook(owner, url)
        failed = await stack.store(hook, [EventStatus.FAILED] * 7)
        abandoned = a_job(
            stack, hook, total=7, published=2, after_page=0, after_created_at=failed[1].created_at,
            after_id=failed[1].id,
        )  # fmt: skip
        await ReplayJobRepository(stack.db).create(abandoned)

        done = await job_until_done(owner, hook.name, abandoned.id)

        assert (done["status"], done["published"]) == ("done", 7)
        await stack.wait_status(failed[2:], EventStatus.SUCCESS)
        assert sorted(stack.delivered_ids(url)) == sorted(e.id for e in failed[2:])
        stored = await ReplayJobRepository(stack.db).get(abandoned.id)
        assert stored is not None
        assert stored.lease_owner != "dead-replica"

    async def test_a_job_whose_webhook_was_deleted_fails(
        self, stack: Stack, other_replica: ReplayJobRunner
    ) -> None:
        owner = await stack.dashboard.owner()
        hook = await stack.webhook(owner, stack.receiver.url())
        await stack.store(hook, [EventStatus.FAILED])
        deleted = await owner.client.delete(f"/api/v1/webhooks/{hook.name}")
        assert deleted.status_code == 204
        abandoned = a_job(stack, hook, total=1)  # orphaned while its webhook was being deleted
        await ReplayJobRepository(stack.db).create(abandoned)

        done = await job_until_done(owner, hook.name, abandoned.id)

        assert (done["status"], done["published"]) == ("failed", 0)
        assert "deleted" in done["error"]

    async def test_stopping_a_runner_ends_its_leases(self, stack: Stack) -> None:
        owner = await stack.dashboard.owner()
        hook = await stack.webhook(owner, stack.receiver.url())
        runtime = stack.dashboard.runtime
        runner = ReplayJobRunner(
            runtime.replay_jobs, runtime.webhooks,
            ReplayPublisher(runtime.require_kafka, runtime.settings.topics),
        )  # fmt: skip
        held = a_job(  # of another namespace: no runner of this test claims it once released
            stack, hook, namespace=unique_name("ns"), lease_owner=runner.owner,
            lease_until=utcnow() + timedelta(hours=1),
        )  # fmt: skip
        await runtime.replay_jobs.create(held)
        await runner.stop()  # never started: only the leases it holds end
        stored = await runtime.replay_jobs.get(held.id)
        assert stored is not None
        assert stored.lease_until <= utcnow()


class TestReplayPreview:
    async def test_counts_what_a_bulk_replay_would_publish_and_publishes_nothing(
        self, stack: Stack
    ) -> None:
        owner = await stack.dashboard.owner()
        url = stack.receiver.url()
        hook = await stack.webhook(owner, url)
        await stack.store(hook, [EventStatus.FAILED] * 3 + [EventStatus.SUCCESS] * 2)
        await stack.store(
            hook, [EventStatus.FAILED], rejected_reason=RejectedReason.INVALID_SIGNATURE
        )
        await stack.store(hook, [EventStatus.FAILED], start=utcnow() + timedelta(hours=1))

        response = await owner.client.get(f"/api/v1/webhooks/{hook.name}/events/replay/preview")

        assert response.status_code == 200, response.text
        assert response.json() == {
            "webhook_name": hook.name, "count": 3, "url": url, "routes": [], "running_job_id": None
        }  # fmt: skip
        assert await ReplayJobRepository(stack.db).running_for_webhook(hook.id) is None
        started = await owner.client.post(f"/api/v1/webhooks/{hook.name}/events/replay")
        assert started.json()["total"] == 3

    async def test_names_the_running_job(self, stack: Stack) -> None:
        owner = await stack.dashboard.owner()
        hook = await stack.webhook(owner, stack.receiver.url())
        held = a_job(stack, hook, lease_until=utcnow() + timedelta(hours=1))
        await ReplayJobRepository(stack.db).create(held)
        response = await owner.client.get(f"/api/v1/webhooks/{hook.name}/events/replay/preview")
        assert response.json()["running_job_id"] == held.id

    async def test_another_owners_webhook_is_404_and_no_destination_is_409(
        self, stack: Stack
    ) -> None:
        owner, stranger = await stack.dashboard.owner(), await stack.dashboard.owner()
        hook = await stack.webhook(owner, stack.receiver.url())
        bare = await stack.webhook(owner, None)
        foreign = await stranger.client.get(f"/api/v1/webhooks/{hook.name}/events/replay/preview")
        nothing = await owner.client.get(f"/api/v1/webhooks/{bare.name}/events/replay/preview")
        assert foreign.status_code == 404
        assert foreign.json()["error"] == "Webhook not found"
        assert nothing.status_code == 409
        assert nothing.json()["error"] == "Nothing to deliver to"


class TestKafkaUnreachable:
    async def test_readiness_is_false_and_replays_are_503(
        self, dashboard_settings: DashboardSettings, db: Database
    ) -> None:
        closed = dashboard_settings.model_copy(
            update={"kafka_bootstrap": f"127.0.0.1:{free_port()}"}
        )
        app = create_app(closed)
        async with app.router.lifespan_context(app):
            rt = app.state.runtime
            user, issued = await AccountService(rt.users, rt.tokens, rt.plans).create_user(
                unique_name("u")
            )
            hook = await rt.webhooks.create(
                create_webhook(username=user.username, forward_url="http://127.0.0.1:9/x")
            )
            event = create_event(webhook_id=hook.id, webhook_name=hook.name, username=hook.username)
            await rt.events.upsert(event)
            transport = httpx.ASGITransport(app=app)
            headers = {"Authorization": f"Bearer {issued.token}"}
            async with httpx.AsyncClient(
                transport=transport, base_url="http://dashboard", headers=headers
            ) as client:
                ready = await client.get("/readyz")
                single = await client.post(f"/api/v1/events/{event.id}/replay")
                bulk = await client.post(f"/api/v1/webhooks/{hook.name}/events/replay")
        assert ready.status_code == 503
        assert ready.json()["kafka"] is False
        assert single.status_code == bulk.status_code == 503
        assert single.json()["error"] == "Service unavailable"


class TestReplayJobRepository:
    async def test_failed_pages_follow_created_at_then_id_across_ties(self, stack: Stack) -> None:
        owner = await stack.dashboard.owner()
        hook = await stack.webhook(owner, None)
        moment = utcnow() - timedelta(hours=2)
        tied = await stack.store(hook, [EventStatus.FAILED] * 3, start=moment)
        tied += [  # same created_at as the first: the id decides
            *await stack.store(hook, [EventStatus.FAILED] * 2, start=moment),
            *await stack.store(hook, [EventStatus.SUCCESS], start=moment),
        ]
        expected = sorted(
            (e for e in tied if e.status is EventStatus.FAILED), key=lambda e: (e.created_at, e.id)
        )
        jobs = ReplayJobRepository(stack.db)
        seen: list[str] = []
        job = a_job(stack, hook, created_at=utcnow())
        while True:
            found = await jobs.failed_page(job, limit=2)
            if not found:
                break
            seen += [e.id for e, _ in found]
            last = found[-1][1]
            job = job.model_copy(
                update={"after_page": last.page, "after_created_at": last.created_at,
                        "after_id": last.event_id}
            )  # fmt: skip
        assert seen == [e.id for e in expected]
        assert await jobs.count_failed(hook.id, before=utcnow()) == len(expected)

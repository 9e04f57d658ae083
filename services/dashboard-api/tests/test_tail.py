"""The live tail: ``TailService`` on the real database, and ``GET /webhooks/{name}/events/stream``
served by real uvicorn servers (one replica, two replicas, a server shutting down, the real
process receiving SIGTERM)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from hookbay_common.clock import isoformat, utcnow
from hookbay_common.db import EventRepository, WebhookRepository
from hookbay_common.db.client import Database
from hookbay_common.db.events.layout import PAGE_SIZE
from hookbay_common.errors import WebhookNotFound
from hookbay_common.models import Event, EventRow, EventStatus
from hookbay_common.secrets_box import SecretBox
from hookbay_dashboard.tail import routes as tail_routes
from hookbay_dashboard.tail.service import Cursor, Gap, TailItem, TailKind, TailService
from hookbay_dev.http import async_client
from tests.support.dashboard import Dashboard, Owner, serve_dashboard
from tests.support.factories import TEST_SECRET_KEY, create_attempt, create_event, create_webhook
from tests.support.processes import service_process
from tests.support.waiting import until

POLL = 0.05


@dataclass
class Hook:
    """A webhook of ``owner`` and a way to record its events as the recorder would."""

    owner: Owner
    id: str
    name: str
    events: EventRepository

    @property
    def stream_path(self) -> str:
        return f"/api/v1/webhooks/{self.name}/events/stream"

    async def record(self, **overrides: Any) -> Event:
        event = create_event(
            webhook_id=self.id, username=self.owner.username, webhook_name=self.name, **overrides
        )
        await self.events.upsert(event)
        return event


@pytest.fixture
async def hook(dashboard: Dashboard) -> Hook:
    owner = await dashboard.owner()
    response = await owner.client.post("/api/v1/webhooks", json={"name": "orders"})
    assert response.status_code == 201, response.text
    return Hook(owner, response.json()["id"], "orders", dashboard.runtime.events)


@dataclass
class SseStream:
    """The messages of one open text/event-stream, parsed as a browser's EventSource would."""

    response: httpx.Response
    messages: list[dict[str, str]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    ended: bool = False

    def __post_init__(self) -> None:
        self._lines = self.response.aiter_lines()
        self._current: dict[str, str] = {}

    @property
    def events(self) -> list[dict[str, Any]]:
        """The data of every ``event: event`` message so far."""
        return [json.loads(m["data"]) for m in self.messages if m.get("event") == "event"]

    @property
    def ids(self) -> list[str]:
        return [e["id"] for e in self.events]

    async def read_until(self, done: Any, timeout: float = 15) -> None:
        """Read lines until ``done(self)`` holds or the stream ends."""
        async with asyncio.timeout(timeout):
            while not done(self):
                try:
                    line = await anext(self._lines)
                except StopAsyncIteration:
                    self.ended = True
                    return
                self._feed(line)

    def _feed(self, line: str) -> None:
        if not line:
            if self._current:
                self.messages.append(self._current)
            self._current = {}
        elif line.startswith(":"):
            self.comments.append(line[1:].strip())
        else:
            name, _, value = line.partition(":")
            self._current[name] = value.removeprefix(" ")


@contextlib.asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient, path: str, **headers: str
) -> AsyncIterator[SseStream]:
    async with client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        yield SseStream(response)


def has(*ids: str) -> Any:
    return lambda stream: set(ids) <= set(stream.ids)


class TestTailService:
    @pytest.fixture
    async def setup(self, db: Database) -> tuple[TailService, EventRepository, Event]:
        webhooks = WebhookRepository(db, SecretBox(TEST_SECRET_KEY))
        webhook = await webhooks.create(create_webhook())
        events = EventRepository(db)
        template = create_event(
            webhook_id=webhook.id, username=webhook.username, webhook_name=webhook.name
        )
        return TailService(webhooks, events, poll_interval=POLL), events, template

    async def test_emits_only_events_recorded_after_it_started(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        tail, events, template = setup
        await events.upsert(_like(template))
        stream = await tail.follow(template.username, template.webhook_name)
        await events.upsert(template)
        assert row(await anext(stream)).id == template.id

    async def test_events_of_one_millisecond_all_arrive(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        """Seven events in one millisecond all arrive."""
        tail, events, template = setup
        stream = await tail.follow(template.username, template.webhook_name)
        made = [_like(template) for _ in range(7)]
        await events.upsert_many(made)
        got = [row(await anext(stream)) for _ in made]
        assert sorted(e.id for e in got) == sorted(e.id for e in made)

    async def test_resumes_from_a_cursor_with_the_events_recorded_since(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        tail, events, template = setup
        seen = _like(template)
        await events.upsert(seen)
        cursor = await _cursor_after(tail, template, seen.id)
        made = [_like(template, created_at=utcnow() - timedelta(seconds=3 - i)) for i in range(3)]
        await events.upsert_many(made)
        stream = await tail.follow(
            template.username, template.webhook_name, last_event_id=cursor.encode()
        )
        got = [await anext(stream) for _ in range(4)]
        # the cursor's page again (``seen`` with it: clients de-duplicate), in recording order
        assert [row(i).id for i in got] == [seen.id, *(e.id for e in made)]
        assert {i.kind for i in got} == {TailKind.EVENT}

    async def test_status_changes_are_pushed_once(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        tail, events, template = setup
        stream = await tail.follow(template.username, template.webhook_name)
        pending = _like(template, forward_url="http://127.0.0.1:9/h", created_at=utcnow())
        await events.upsert(pending)
        first = await anext(stream)
        assert (first.kind, row(first).status) == (TailKind.EVENT, EventStatus.PENDING)
        await events.apply_attempts([create_attempt(pending, status_code=200, latency_ms=3.0)])
        changed = await anext(stream)
        assert (changed.kind, row(changed).id) == (TailKind.STATUS, pending.id)
        assert (row(changed).status, row(changed).last_status_code) == (EventStatus.SUCCESS, 200)
        later = _like(template, created_at=utcnow())
        await events.upsert(later)
        assert row(await anext(stream)).id == later.id  # the status change came only once

    async def test_tails_of_one_webhook_share_one_feed(
        self, setup: tuple[TailService, EventRepository, Event], db: Database
    ) -> None:
        _, events, template = setup
        registry = CollectorRegistry()
        tail = TailService(
            WebhookRepository(db, SecretBox(TEST_SECRET_KEY)), events, poll_interval=POLL,
            registry=registry,
        )  # fmt: skip

        def gauge(name: str) -> float | None:
            return registry.get_sample_value(name)

        streams = [await tail.follow(template.username, template.webhook_name) for _ in range(20)]
        made = _like(template, created_at=utcnow())
        await events.upsert(made)
        for stream in streams:
            assert row(await anext(stream)).id == made.id
        assert (gauge("hookbay_dashboard_tail_feeds"), gauge("hookbay_dashboard_tails")) == (1, 20)
        for stream in streams:
            await stream.aclose()  # type: ignore[attr-defined]
        assert gauge("hookbay_dashboard_tails") == 0
        await until(lambda: gauge("hookbay_dashboard_tail_feeds") == 0)  # the feed stops

    async def test_an_event_id_as_last_event_id_resumes_from_its_page(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        """A client of an earlier release sends an event id: the stream goes on from that
        event's page (what it saw again, then what is new), nothing skipped."""
        tail, events, template = setup
        first, second = _like(template), _like(template)
        await events.upsert_many([first, second])
        stream = await tail.follow(template.username, template.webhook_name, last_event_id=first.id)
        assert [row(await anext(stream)) for _ in range(2)] != []
        third = _like(template)
        await events.upsert(third)
        item = await anext(stream)
        assert (item.kind, item.event and item.event.id) == (TailKind.EVENT, third.id)

    async def test_idle_streams_send_heartbeats_with_the_cursor(
        self, db: Database, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        _, events, template = setup
        tail = _service(db, events, heartbeat=0.1)
        stream = await tail.follow(template.username, template.webhook_name)
        beat = await anext(stream)
        assert (beat.kind, beat.event) == (TailKind.HEARTBEAT, None)
        assert Cursor.parse(beat.cursor.encode()) == beat.cursor

    async def test_unknown_webhook(self, setup: tuple[TailService, EventRepository, Event]) -> None:
        tail, _, template = setup
        with pytest.raises(WebhookNotFound):
            await tail.follow(template.username, "nope")


class TestResume:
    """Resuming from a cursor of any age: the change pages since are read back."""

    @pytest.fixture
    async def setup(self, db: Database) -> tuple[TailService, EventRepository, Event]:
        webhooks = WebhookRepository(db, SecretBox(TEST_SECRET_KEY))
        webhook = await webhooks.create(create_webhook())
        events = EventRepository(db)
        template = create_event(
            webhook_id=webhook.id, username=webhook.username, webhook_name=webhook.name
        )
        return _service(db, events), events, template

    async def test_an_event_recorded_five_minutes_after_it_arrived(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        """Recorded after the client's cursor, received five minutes before: it arrives, as
        an event (the old tail's 60-second window never showed it)."""
        tail, events, template = setup
        await _fill_pages(events, template, 2)  # the cursor's page is settled below the top
        cursor = await _cursor_after(tail, template, None)
        late = _like(template, created_at=utcnow() - timedelta(minutes=5))
        await events.upsert(late)
        stream = await tail.follow(
            template.username, template.webhook_name, last_event_id=cursor.encode()
        )
        item = await _next_about(stream, late.id)
        assert item.kind is TailKind.EVENT

    async def test_a_status_change_ten_minutes_later_on_a_settled_page(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        """An event shown, pages recorded above it, then its retry succeeds ten minutes on
        (the client's cursor dates from then): the resumed stream sends the new status."""
        tail, events, template = setup
        pending = _like(template, created_at=utcnow() - timedelta(minutes=10))
        await events.upsert(pending)
        await _fill_pages(events, template, 2)
        cursor = await _cursor_after(tail, template, None)
        written = Cursor(cursor.page, utcnow() - timedelta(minutes=10))
        await events.apply_attempts([create_attempt(pending, status_code=200, number=2)])
        stream = await tail.follow(
            template.username, template.webhook_name, last_event_id=written.encode(),
            retention=timedelta(days=1),
        )  # fmt: skip
        item = await _next_about(stream, pending.id)
        assert item.kind is TailKind.STATUS
        assert row(item).status is EventStatus.SUCCESS

    async def test_a_resume_point_older_than_retention_is_a_gap(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        tail, events, template = setup
        kept = _like(template)
        await events.upsert(kept)
        old = Cursor(0, utcnow() - timedelta(days=31))
        stream = await tail.follow(
            template.username, template.webhook_name, last_event_id=old.encode(),
            retention=timedelta(days=30),
        )  # fmt: skip
        gap = await anext(stream)
        assert gap.kind is TailKind.GAP
        assert gap.gap == Gap(old.at, 0)
        assert (await _next_about(stream, kept.id)).kind is TailKind.EVENT  # then what is kept

    async def test_a_resume_page_retention_deleted_is_a_gap(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        tail, events, template = setup
        await _fill_pages(events, template, 2)
        async for expired in events.expired_pages(template.username, utcnow()):
            if expired.page == 0:
                await events.delete_page(expired)
        stream = await tail.follow(
            template.username, template.webhook_name, last_event_id=Cursor(0, utcnow()).encode()
        )
        gap = await anext(stream)
        assert gap.kind is TailKind.GAP
        assert gap.gap is not None
        assert gap.gap.resumed_page == 1

    async def test_what_was_sent_before_the_cursor_is_not_sent_again(
        self, setup: tuple[TailService, EventRepository, Event]
    ) -> None:
        tail, events, template = setup
        made = await _fill_pages(events, template, 2)
        cursor = await _cursor_after(tail, template, None)
        fresh = _like(template)
        await events.upsert(fresh)
        stream = await tail.follow(
            template.username, template.webhook_name, last_event_id=cursor.encode()
        )
        item = await anext(stream)
        assert row(item).id not in {e.id for e in made[:100]}


def _service(db: Database, events: EventRepository, *, heartbeat: float = 15.0) -> TailService:
    return TailService(
        WebhookRepository(db, SecretBox(TEST_SECRET_KEY)), events, poll_interval=POLL,
        heartbeat=heartbeat, settle=timedelta(0),
    )  # fmt: skip


async def _fill_pages(events: EventRepository, template: Event, pages: int) -> list[Event]:
    """Record ``pages`` pages of events (the last one part full)."""
    made = [_like(template) for _ in range(PAGE_SIZE * (pages - 1) + 1)]
    await events.upsert_many(made)
    return made


async def _cursor_after(tail: TailService, template: Event, event_id: str | None) -> Cursor:
    """The cursor a client holds once it has seen everything up to now: a heartbeat's
    (``event_id`` given: the one of that event's message from the start of the webhook)."""
    if event_id is not None:
        stream = await tail.follow(
            template.username, template.webhook_name, last_event_id=Cursor(0, utcnow()).encode()
        )
        item = await _next_about(stream, event_id)
        await stream.aclose()  # type: ignore[attr-defined]
        return item.cursor
    quick = TailService(tail._webhooks, tail._events, poll_interval=POLL, heartbeat=0.05)
    stream = await quick.follow(template.username, template.webhook_name)
    beat = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    return beat.cursor


async def _next_about(stream: AsyncIterator[TailItem], event_id: str) -> TailItem:
    async with asyncio.timeout(10):
        async for item in stream:
            if item.event is not None and item.event.id == event_id:
                return item
    raise AssertionError(f"{event_id} never came")


def row(item: TailItem) -> EventRow:
    assert item.event is not None, item
    return item.event


def _like(template: Event, **overrides: Any) -> Event:
    fields = {
        "webhook_id": template.webhook_id, "username": template.username,
        "webhook_name": template.webhook_name, "created_at": template.created_at,
    }  # fmt: skip
    return create_event(**{**fields, **overrides})


class TestStream:
    async def test_an_event_recorded_after_opening_arrives_as_a_summary(self, hook: Hook) -> None:
        before = await hook.record()
        async with open_stream(hook.owner.client, hook.stream_path) as stream:
            assert stream.response.headers["content-type"].startswith("text/event-stream")
            assert stream.response.headers["cache-control"] == "no-store"
            event = await hook.record(signature_valid=True)
            await stream.read_until(has(event.id))
        assert stream.ids == [event.id]
        assert before.id not in stream.ids
        hello, message = stream.messages
        assert hello["event"] == "heartbeat"
        assert message["event"] == "event"
        assert Cursor.parse(message["id"]) is not None
        assert hello["retry"] == "3000"
        assert json.loads(message["data"]) == {
            "id": event.id,
            "request_id": event.request_id,
            "webhook_id": hook.id,
            "webhook_name": hook.name,
            "rejected_reason": None,
            "created_at": isoformat(event.created_at),
            "status": EventStatus.PENDING.value,
            "content_type": "application/json",
            "client_ip": "203.0.113.7",
            "signature_valid": True,
            "verification": None,
            "handshake": None,
            "body_size": len(event.body),
            "last_status_code": None,
            "last_latency_ms": None,
            "last_error": None,
            "next_retry_at": None,
            "attempt_count": 0,
        }

    async def test_a_late_recorded_event_still_arrives(self, hook: Hook) -> None:
        async with open_stream(hook.owner.client, hook.stream_path) as stream:
            late = await hook.record(created_at=utcnow() - timedelta(seconds=5))
            await stream.read_until(has(late.id))

    async def test_no_duplicates_across_polls(self, hook: Hook) -> None:
        async with open_stream(hook.owner.client, hook.stream_path) as stream:
            recorded = []
            for _ in range(3):
                recorded.append(await hook.record())
                await stream.read_until(has(*(e.id for e in recorded)))
            # Every poll since re-reads the three (they are in the window): a repeat would come
            # before the sentinel recorded last.
            sentinel = await hook.record()
            await stream.read_until(has(sentinel.id))
        assert stream.ids == [*(e.id for e in recorded), sentinel.id]

    async def test_resumes_after_last_event_id(self, hook: Hook) -> None:
        async with open_stream(hook.owner.client, hook.stream_path) as stream:
            first = await hook.record()
            await stream.read_until(has(first.id))
        cursor = stream.messages[-1]["id"]
        second, third = [await hook.record() for _ in range(2)]
        headers = {"Last-Event-ID": cursor}
        async with open_stream(hook.owner.client, hook.stream_path, **headers) as stream:
            await stream.read_until(has(second.id, third.id))
        assert stream.ids[-2:] == [second.id, third.id]  # the cursor's page again, then new
        path = f"{hook.stream_path}?last_event_id={cursor}"  # a browser's new EventSource
        async with open_stream(hook.owner.client, path) as stream:
            await stream.read_until(has(second.id, third.id))

    async def test_a_cursor_older_than_the_owners_retention_is_a_gap(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner(plan="free")  # 30 days
        response = await owner.client.post("/api/v1/webhooks", json={"name": "orders"})
        assert response.status_code == 201, response.text
        old = Cursor(0, utcnow() - timedelta(days=31)).encode()
        headers = {"Last-Event-ID": old}
        path = "/api/v1/webhooks/orders/events/stream"
        async with open_stream(owner.client, path, **headers) as stream:
            await stream.read_until(lambda s: len(s.messages) >= 2)
        assert stream.messages[1]["event"] == "gap"
        assert json.loads(stream.messages[1]["data"])["since"] == isoformat(Cursor.parse(old).at)  # type: ignore[union-attr]

    async def test_a_status_change_arrives_as_a_status_message(self, hook: Hook) -> None:
        """A pending event shown by the stream, then its successful attempt recorded: one
        ``event: status`` message with the new status and the attempt's outcome."""
        async with open_stream(hook.owner.client, hook.stream_path) as stream:
            pending = await hook.record(created_at=utcnow())
            await stream.read_until(has(pending.id))
            attempt = create_attempt(pending, status_code=200, latency_ms=4.0)
            await hook.events.apply_attempts([attempt])
            await stream.read_until(lambda s: any(m["event"] == "status" for m in s.messages))
        first, changed = [m for m in stream.messages if m["event"] != "heartbeat"]
        assert (first["event"], json.loads(first["data"])["status"]) == ("event", "pending")
        assert changed["event"] == "status"
        assert Cursor.parse(changed["id"]) is not None
        summary = json.loads(changed["data"])
        assert (summary["id"], summary["status"]) == (pending.id, EventStatus.SUCCESS.value)
        assert (summary["last_status_code"], summary["last_latency_ms"]) == (200, 4.0)
        assert summary["attempt_count"] == 1

    async def test_keep_alive_comments(self, hook: Hook, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(tail_routes, "PING_SECONDS", 0.1)
        async with open_stream(hook.owner.client, hook.stream_path) as stream:
            await stream.read_until(lambda s: len(s.comments) >= 2)
        assert all(c.startswith("ping") for c in stream.comments)
        assert [m["event"] for m in stream.messages] == ["heartbeat"]  # the first: a cursor

    async def test_works_with_the_session_cookie(self, hook: Hook) -> None:
        client, _ = await hook.owner.login()
        async with open_stream(client, hook.stream_path) as stream:
            event = await hook.record()
            await stream.read_until(has(event.id))

    async def test_another_owners_webhook_is_a_json_404(
        self, dashboard: Dashboard, hook: Hook
    ) -> None:
        stranger = await dashboard.owner()
        for client, name in [(stranger.client, hook.name), (hook.owner.client, "nope")]:
            response = await client.get(f"/api/v1/webhooks/{name}/events/stream")
            assert response.status_code == 404
            assert response.headers["content-type"] == "application/json"
            assert response.json()["error"] == "Webhook not found"

    async def test_needs_authentication(self, dashboard: Dashboard, hook: Hook) -> None:
        async with dashboard.client() as client:
            response = await client.get(hook.stream_path)
        assert response.status_code == 401

    async def test_a_disconnect_ends_the_stream_on_the_server(
        self, dashboard: Dashboard, hook: Hook
    ) -> None:
        """The request is counted (the metrics middleware's ``finally``) once the server ended it."""
        route = '/webhooks/{name}/events/stream",status="200"'

        async def streams_ended() -> float:
            async with dashboard.client() as client:
                text = (await client.get("/metrics")).text
            counts = [line for line in text.splitlines() if route in line and "_total" in line]
            return float(counts[0].rsplit(" ", 1)[1]) if counts else 0.0

        ended = await streams_ended()
        async with open_stream(hook.owner.client, hook.stream_path) as stream:
            event = await hook.record()
            await stream.read_until(has(event.id))
            assert await streams_ended() == ended
        await until(lambda: _more(streams_ended, ended), 10, what="stream ended on the server")


async def _more(count: Any, than: float) -> bool:
    return bool(await count() > than)


class TestReplicas:
    async def test_a_stream_on_one_replica_gets_events_recorded_through_another(
        self, dashboard: Dashboard, hook: Hook
    ) -> None:
        async with serve_dashboard(dashboard.settings) as replica_b:
            headers = {"Authorization": f"Bearer {hook.owner.token}"}
            async with (
                replica_b.client(headers=headers) as client_b,
                open_stream(hook.owner.client, hook.stream_path) as on_a,
                open_stream(client_b, hook.stream_path) as on_b,
            ):
                via_b = Hook(hook.owner, hook.id, hook.name, replica_b.runtime.events)
                event = await via_b.record()
                await on_a.read_until(has(event.id))
                await on_b.read_until(has(event.id))
            assert on_a.ids == on_b.ids == [event.id]


class TestShutdown:
    async def test_stopping_the_server_ends_open_streams(
        self, dashboard: Dashboard, hook: Hook
    ) -> None:
        """What SIGTERM does to uvicorn (``should_exit``), with a stream open: serve() returns."""
        served = serve_dashboard(dashboard.settings)
        replica = await served.__aenter__()
        headers = {"Authorization": f"Bearer {hook.owner.token}"}
        async with (
            replica.client(headers=headers) as client,
            open_stream(client, hook.stream_path) as stream,
        ):
            event = await hook.record()
            await stream.read_until(has(event.id))
            async with asyncio.timeout(10):
                await served.__aexit__(None, None, None)
            await stream.read_until(lambda s: False)  # a clean end, not a cut connection
            assert stream.ended

    async def test_sigterm_stops_the_process_with_a_stream_open(
        self, env: dict[str, str], hook: Hook, tmp_path: Path
    ) -> None:
        """``python -m hookbay_dashboard``: the stream ends cleanly and the shutdown completes
        without reaching uvicorn's graceful-shutdown timeout."""
        async with service_process("dashboard", env, tmp_path / "dashboard.log") as process:
            headers = {"Authorization": f"Bearer {hook.owner.token}"}
            async with (
                async_client(base_url=process.base, headers=headers, timeout=30) as client,
                open_stream(client, hook.stream_path) as stream,
            ):
                event = await hook.record()
                await stream.read_until(has(event.id))
                process.terminate()
                await stream.read_until(lambda s: False)
                assert stream.ended
            # uvicorn re-raises the signal it caught once its shutdown is complete.
            assert await process.wait() == -signal.SIGTERM
        log = process.log()
        assert "Application shutdown complete." in log
        assert "dashboard_stopped" in process.log_events()
        assert "graceful shutdown exceeded" not in log, log

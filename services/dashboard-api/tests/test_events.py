"""The events read side of the dashboard API: lists with signed cursors, detail, exports and
the overview, on the real stack. Events are stored through the repositories."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from hookbay_common.clock import isoformat, utcnow
from hookbay_common.db.events import PAGE_SIZE, EventCursor, record_batch
from hookbay_common.db.stats import HOUR, Bucket, Counts
from hookbay_common.errors import InvalidCursor
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import (
    AttemptTrigger,
    DeliveryStatus,
    Event,
    EventStatus,
    EventVerification,
    HandshakeKind,
    InvalidReason,
    MatchedSecret,
    RejectedReason,
    VerificationResult,
    VerificationType,
    Webhook,
)
from hookbay_dashboard.deps import get_events
from hookbay_dashboard.events.cursor import cursor_key, decode_cursor, encode_cursor
from hookbay_dashboard.events.schemas import StatusFilter
from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import Dashboard, Owner, serve_dashboard
from tests.support.factories import (
    create_attempt,
    create_delivery,
    create_event,
    create_webhook,
)

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SUMMARY_FIELDS = {
    "id", "request_id", "webhook_id", "webhook_name", "created_at", "status",
    "rejected_reason", "content_type", "client_ip", "signature_valid", "body_size",
    "last_status_code", "last_latency_ms", "last_error", "next_retry_at", "attempt_count",
    "verification", "handshake",
}  # fmt: skip


async def hook_of(dashboard: Dashboard, owner: Owner, **overrides: Any) -> Webhook:
    webhook = create_webhook(username=owner.username, **overrides)
    return await dashboard.runtime.webhooks.create(webhook)


async def store(
    dashboard: Dashboard,
    webhook: Webhook,
    statuses: Sequence[EventStatus],
    *,
    start: datetime | None = None,
    step: timedelta = timedelta(milliseconds=10),
) -> list[Event]:
    """Events of ``webhook`` with ``statuses``, ``step`` apart from ``start`` (oldest first)."""
    start = start or utcnow() - timedelta(hours=1)
    made = [
        create_event(
            webhook_id=webhook.id,
            webhook_name=webhook.name,
            username=webhook.username,
            created_at=start + step * i,
            status=status,
        )
        for i, status in enumerate(statuses)
    ]
    events = dashboard.runtime.events
    await events.upsert_many(made)
    for event in made:
        if event.status is not event.initial_status:
            await events.set_status(event.id, event.status)
    return made


def newest_first(events: Sequence[Event]) -> list[str]:
    return [e.id for e in sorted(events, key=lambda e: (e.created_at, e.id), reverse=True)]


async def page(owner: Owner, name: str, **params: Any) -> dict[str, Any]:
    response = await owner.client.get(f"/api/v1/webhooks/{name}/events", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for item in items]


def flip(text: str, at: int) -> str:
    return text[:at] + ("B" if text[at] == "A" else "A") + text[at + 1 :]


S, F, P = EventStatus.SUCCESS, EventStatus.FAILED, EventStatus.PENDING


class TestCursor:
    KEY = cursor_key("one secret key of at least thirty-two chars")

    def test_round_trip_is_exact_to_the_millisecond(self) -> None:
        for position in [EventCursor(7, utcnow(), new_id(IdPrefix.EVENT)), EventCursor(3)]:
            token = encode_cursor(self.KEY, "wh_1", "all", position)
            assert decode_cursor(self.KEY, token, "wh_1", "all") == position

    def test_another_key_or_list_is_refused(self) -> None:
        token = encode_cursor(self.KEY, "wh_1", "all", EventCursor(0, utcnow(), "evt_1"))
        other_key = cursor_key("another secret key of thirty-two chars")
        for key, webhook_id, status in [
            (other_key, "wh_1", "all"), (self.KEY, "wh_2", "all"), (self.KEY, "wh_1", "failed"),
        ]:  # fmt: skip
            with pytest.raises(InvalidCursor):
                decode_cursor(key, token, webhook_id, status)

    def test_the_key_is_bound_to_cursors(self) -> None:
        secret = "one secret key of at least thirty-two chars"
        assert cursor_key(secret) != hashlib.sha256(secret.encode()).digest()
        assert len(cursor_key(secret)) == 32


class TestList:
    async def test_newest_first_without_bodies(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        made = await store(dashboard, hook, [S, F, P, S])
        body = await page(owner, hook.name)
        assert ids(body["items"]) == newest_first(made)
        assert body["next_cursor"] is None
        first = body["items"][0]
        assert set(first) == SUMMARY_FIELDS
        newest = made[-1]
        assert first["request_id"] == newest.request_id
        assert first["webhook_name"] == hook.name
        assert first["created_at"] == isoformat(newest.created_at)
        assert TIMESTAMP.match(first["created_at"])

    async def test_each_status_filter_keeps_its_status(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        made = await store(dashboard, hook, [S, F, P, S, F, P])
        filters = [("all", {S, F, P}), ("success", {S}), ("failed", {F}), ("pending", {P})]
        for status, kept in filters:
            body = await page(owner, hook.name, status=status)
            assert ids(body["items"]) == newest_first([e for e in made if e.status in kept])
            assert {item["status"] for item in body["items"]} == {s.value for s in kept}

    async def test_rejected_event_shows_its_reason(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        event = create_event(
            webhook_id=hook.id, webhook_name=hook.name, username=owner.username,
            signature_valid=False, rejected_reason=RejectedReason.INVALID_SIGNATURE,
        )  # fmt: skip
        await dashboard.runtime.events.upsert(event)
        [item] = (await page(owner, hook.name, status="failed"))["items"]
        assert (item["rejected_reason"], item["signature_valid"]) == ("invalid_signature", False)

    async def test_page_size_bounds(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        await store(dashboard, hook, [S, S, S])
        for limit in (0, 101):
            response = await owner.client.get(
                f"/api/v1/webhooks/{hook.name}/events", params={"limit": limit}
            )
            assert response.status_code == 422
            body = response.json()
            assert body["error"] == "Invalid request"
            assert body["message"].startswith("query.limit: Input should be")
            assert body["detail"][0]["loc"] == ["query", "limit"]
        assert len((await page(owner, hook.name, limit=100))["items"]) == 3
        assert len((await page(owner, hook.name, limit=1))["items"]) == 1

    async def test_unknown_status_is_422(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        response = await owner.client.get(
            f"/api/v1/webhooks/{hook.name}/events", params={"status": "delivered"}
        )
        assert response.status_code == 422
        assert response.json()["message"].startswith("query.status:")

    async def test_pages_stay_exact_while_events_arrive(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        # Pairs share a created_at, so the id breaks the tie across page boundaries.
        original = await store(dashboard, hook, [S, F] * 6, step=timedelta(milliseconds=5))
        original += await store(
            dashboard, hook, [S] * 5, start=original[-1].created_at, step=timedelta(0)
        )
        seen: list[str] = []
        cursor = None
        for _ in range(20):
            params = {"limit": 4} | ({"cursor": cursor} if cursor else {})
            body = await page(owner, hook.name, **params)
            seen += ids(body["items"])
            await store(dashboard, hook, [S, P], start=utcnow())  # newer than any page
            cursor = body["next_cursor"]
            if cursor is None:
                break
        assert seen == newest_first(original)

    async def test_filtered_pages_continue_within_the_filter(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        made = await store(dashboard, hook, [S, F, F, S, F, P, F])
        first = await page(owner, hook.name, status="failed", limit=3)
        rest = await page(owner, hook.name, status="failed", cursor=first["next_cursor"])
        assert ids(first["items"]) + ids(rest["items"]) == newest_first(
            [e for e in made if e.status is F]
        )
        assert rest["next_cursor"] is None

    async def test_tampered_cursor_is_400(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        await store(dashboard, hook, [S, S, S])
        cursor = (await page(owner, hook.name, limit=1))["next_cursor"]
        assert cursor
        payload, _signature = cursor.split(".")
        for bad in [
            flip(cursor, 5), flip(cursor, len(payload) - 1), flip(cursor, len(cursor) - 1),
            payload, "garbage", "", "a.b", cursor + "x",
        ]:  # fmt: skip
            response = await owner.client.get(
                f"/api/v1/webhooks/{hook.name}/events", params={"cursor": bad}
            )
            assert response.status_code == 400, bad
            assert response.json()["error"] == "Invalid cursor"

    async def test_cursor_of_another_list_is_400(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook, other = await hook_of(dashboard, owner), await hook_of(dashboard, owner)
        await store(dashboard, hook, [S, S, S])
        cursor = (await page(owner, hook.name, limit=1))["next_cursor"]
        for name, status in [(other.name, "all"), (hook.name, "success")]:
            response = await owner.client.get(
                f"/api/v1/webhooks/{name}/events", params={"cursor": cursor, "status": status}
            )
            assert response.status_code == 400
            assert "start again without a cursor" in response.json()["message"]

    async def test_lookup_by_request_id(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook, other = await hook_of(dashboard, owner), await hook_of(dashboard, owner)
        made = await store(dashboard, hook, [S, F, S])
        [elsewhere] = await store(dashboard, other, [S])
        found = await page(owner, hook.name, request_id=made[1].request_id)
        assert (ids(found["items"]), found["next_cursor"]) == ([made[1].id], None)
        for request_id, status in [
            (elsewhere.request_id, "all"), (made[1].request_id, "success"),
            (new_id(IdPrefix.REQUEST), "all"),
        ]:  # fmt: skip
            none = await page(owner, hook.name, request_id=request_id, status=status)
            assert none["items"] == []

    async def test_another_owners_webhook_is_404(self, dashboard: Dashboard) -> None:
        owner, stranger = await dashboard.owner(), await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        await store(dashboard, hook, [S])
        for who, name in [(stranger, hook.name), (owner, "missing")]:
            response = await who.client.get(f"/api/v1/webhooks/{name}/events")
            assert response.status_code == 404
            assert response.json()["error"] == "Webhook not found"


class TestDateRange:
    """``since`` (inclusive) and ``until`` (exclusive) bound ``created_at`` on the list, the
    counts and the export alike; events one minute apart, the bounds on events 1 and 4."""

    PATHS = ("/events", "/events/counts", "/events/export")

    @pytest.fixture
    async def minutes(self, dashboard: Dashboard) -> tuple[Owner, Webhook, list[Event]]:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        start = (utcnow() - timedelta(hours=2)).replace(second=0, microsecond=0)
        made = await store(
            dashboard, hook, [S, F, P, S, F, P], start=start, step=timedelta(minutes=1)
        )
        return owner, hook, made

    async def test_the_list_keeps_since_and_leaves_out_until(
        self, minutes: tuple[Owner, Webhook, list[Event]]
    ) -> None:
        owner, hook, made = minutes
        since, until = isoformat(made[1].created_at), isoformat(made[4].created_at)
        assert ids((await page(owner, hook.name, since=since, until=until))["items"]) == (
            newest_first(made[1:4])
        )
        assert ids((await page(owner, hook.name, since=since))["items"]) == newest_first(made[1:])
        assert ids((await page(owner, hook.name, until=until))["items"]) == newest_first(made[:4])
        failed = await page(owner, hook.name, since=since, until=until, status="failed")
        assert ids(failed["items"]) == [made[1].id]
        paged = await page(owner, hook.name, since=since, until=until, limit=2)
        rest = await page(owner, hook.name, since=since, until=until, cursor=paged["next_cursor"])
        assert ids(paged["items"]) + ids(rest["items"]) == newest_first(made[1:4])

    async def test_an_offset_other_than_utc_is_the_same_instant(
        self, minutes: tuple[Owner, Webhook, list[Event]]
    ) -> None:
        owner, hook, made = minutes
        plus_two = timezone(timedelta(hours=2))
        since = made[2].created_at.astimezone(plus_two).isoformat()
        assert since.endswith("+02:00")
        assert ids((await page(owner, hook.name, since=since))["items"]) == newest_first(made[2:])

    async def test_the_export_keeps_the_range(
        self, minutes: tuple[Owner, Webhook, list[Event]]
    ) -> None:
        owner, hook, made = minutes
        params = {"since": isoformat(made[1].created_at), "until": isoformat(made[4].created_at)}
        response = await owner.client.get(
            f"/api/v1/webhooks/{hook.name}/events/export", params=params
        )
        assert response.status_code == 200
        assert [e["id"] for e in response.json()] == [e.id for e in made[1:4]]
        pending = await owner.client.get(
            f"/api/v1/webhooks/{hook.name}/events/export", params={**params, "status": "pending"}
        )
        assert [e["id"] for e in pending.json()] == [made[2].id]

    async def test_bad_bounds_are_a_json_error_naming_them(
        self, minutes: tuple[Owner, Webhook, list[Event]]
    ) -> None:
        owner, hook, made = minutes
        at = isoformat(made[1].created_at)
        order, no_zone = "since must be earlier than until", "Input should have timezone info"
        not_a_date = "Input should be a valid datetime"
        cases = [  # (params, status, start of the message); every one "Invalid request"
            ({"since": at, "until": at}, 400, order),
            ({"since": isoformat(made[4].created_at), "until": at}, 400, order),
            ({"since": "2026-11-20T10:00:00"}, 422, f"query.since: {no_zone}"),
            ({"until": "2026-11-20T10:00:00"}, 422, f"query.until: {no_zone}"),
            ({"since": "yesterday"}, 422, f"query.since: {not_a_date}"),
            ({"until": "2026-13-45T10:00:00Z"}, 422, f"query.until: {not_a_date}"),
        ]
        for path in self.PATHS:
            for params, status, message in cases:
                response = await owner.client.get(
                    f"/api/v1/webhooks/{hook.name}{path}", params=params
                )
                assert response.status_code == status, (path, params, response.text)
                assert response.headers["content-type"] == "application/json"
                assert "content-disposition" not in response.headers
                body = response.json()
                assert body["error"] == "Invalid request", (path, params)
                assert body["message"].startswith(message), (path, params, body["message"])

    async def test_another_owners_webhook_is_404_with_a_range(
        self, dashboard: Dashboard, minutes: tuple[Owner, Webhook, list[Event]]
    ) -> None:
        _, hook, made = minutes
        stranger = await dashboard.owner()
        params = {"since": isoformat(made[0].created_at)}
        for path in self.PATHS:
            response = await stranger.client.get(
                f"/api/v1/webhooks/{hook.name}{path}", params=params
            )
            assert response.status_code == 404, path
            assert response.json()["error"] == "Webhook not found"


class TestCounts:
    async def counts(self, owner: Owner, name: str, **params: Any) -> dict[str, Any]:
        response = await owner.client.get(f"/api/v1/webhooks/{name}/events/counts", params=params)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def test_per_status_of_the_webhook_only(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook, other = await hook_of(dashboard, owner), await hook_of(dashboard, owner)
        await store(dashboard, hook, [S, F, P, S, F, F, P])
        await store(dashboard, other, [S, S])
        assert await self.counts(owner, hook.name) == {
            "success": 2, "failed": 3, "pending": 2, "total": 7,
        }  # fmt: skip
        empty = await hook_of(dashboard, owner)
        assert await self.counts(owner, empty.name) == {
            "success": 0, "failed": 0, "pending": 0, "total": 0,
        }  # fmt: skip

    async def test_within_since_and_until(self, dashboard: Dashboard) -> None:
        """Bounds on whole minutes (counted from the pages' per-minute counts) and not (from
        the heads) agree: since inclusive, until exclusive."""
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        start = (utcnow() - timedelta(hours=3)).replace(second=0, microsecond=0)
        made = await store(
            dashboard, hook, [S, F, P, S, F, P], start=start, step=timedelta(minutes=1)
        )
        on_minutes = {
            "since": isoformat(made[1].created_at),
            "until": isoformat(made[4].created_at),
        }
        off_minutes = {
            "since": isoformat(made[1].created_at - timedelta(milliseconds=1)),
            "until": isoformat(made[3].created_at + timedelta(milliseconds=1)),
        }
        expected = {"success": 1, "failed": 1, "pending": 1, "total": 3}
        assert await self.counts(owner, hook.name, **on_minutes) == expected
        assert await self.counts(owner, hook.name, **off_minutes) == expected
        assert await self.counts(owner, hook.name, since=on_minutes["since"]) == {
            "success": 1, "failed": 2, "pending": 2, "total": 5,
        }  # fmt: skip
        assert await self.counts(owner, hook.name, until=on_minutes["since"]) == {
            "success": 1, "failed": 0, "pending": 0, "total": 1,
        }  # fmt: skip

    async def test_another_owners_or_a_missing_webhook_is_404(self, dashboard: Dashboard) -> None:
        owner, stranger = await dashboard.owner(), await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        await store(dashboard, hook, [S])
        for who, name in [(stranger, hook.name), (owner, "missing")]:
            response = await who.client.get(f"/api/v1/webhooks/{name}/events/counts")
            assert response.status_code == 404
            assert response.json()["error"] == "Webhook not found"


class TestAttemptCount:
    async def test_rows_count_the_attempts_of_the_latest_delivery(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        retried, untried = await store(dashboard, hook, [P, P])
        chain = new_id(IdPrefix.CHAIN)
        await dashboard.runtime.events.apply_attempts([
            create_attempt(retried, chain_id=chain, number=1, status_code=502),
            create_attempt(retried, chain_id=chain, number=2, status_code=503),
            create_attempt(retried, chain_id=chain, number=3, status_code=200),
        ])  # fmt: skip
        rows = {item["id"]: item for item in (await page(owner, hook.name))["items"]}
        assert (rows[retried.id]["attempt_count"], rows[retried.id]["status"]) == (3, "success")
        assert rows[untried.id]["attempt_count"] == 0


class TestSearch:
    async def test_text_in_headers_or_body_ignoring_case(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        in_body, in_header, in_binary, neither = (
            create_event(
                webhook_id=hook.id, webhook_name=hook.name, username=owner.username,
                created_at=utcnow() - timedelta(seconds=10 - i), request_headers=headers, body=body,
            )
            for i, (headers, body) in enumerate([
                ({}, b'{"order": "Needle-42"}'),
                ({"X-Trace": "a NEEDLE here"}, b"{}"),
                ({}, b"\xff\x00needle\xfe"),
                ({"x-other": "hay"}, b"haystack"),
            ])
        )  # fmt: skip
        await dashboard.runtime.events.upsert_many([in_body, in_header, in_binary, neither])
        found = await page(owner, hook.name, q="needle")
        assert ids(found["items"]) == [in_binary.id, in_header.id, in_body.id]
        assert ids((await page(owner, hook.name, q="x-trace: a needle"))["items"]) == [in_header.id]
        assert ids((await page(owner, hook.name, q="needle", status="success"))["items"]) == []
        assert (await page(owner, hook.name, q="nowhere"))["items"] == []

    async def test_a_search_reads_a_bounded_part_then_a_cursor(self, dashboard: Dashboard) -> None:
        """Only the oldest of 250 events matches: with 1 page per call (monkeypatched), the first
        calls answer nothing and a cursor; following it finds the match; the cursor is bound to
        the search."""
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        start = utcnow() - timedelta(hours=1)
        made = [
            create_event(
                webhook_id=hook.id, webhook_name=hook.name, username=owner.username,
                created_at=start + timedelta(seconds=i), body=b"needle" if i == 0 else b"hay",
            )
            for i in range(PAGE_SIZE * 2 + 50)
        ]  # fmt: skip
        await dashboard.runtime.events.upsert_many(made)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("hookbay_common.db.events.listing.MAX_SEARCH_PAGES", 1)
            first = await page(owner, hook.name, q="needle")
            assert (first["items"], first["next_cursor"] is not None) == ([], True)
            other = await owner.client.get(
                f"/api/v1/webhooks/{hook.name}/events",
                params={"q": "hay", "cursor": first["next_cursor"]},
            )
            assert other.status_code == 400
            cursor, found = first["next_cursor"], []
            while cursor is not None:
                more = await page(owner, hook.name, q="needle", cursor=cursor)
                found += ids(more["items"])
                cursor = more["next_cursor"]
        assert found == [made[0].id]

    async def test_bad_searches_are_422_and_other_owners_404(self, dashboard: Dashboard) -> None:
        owner, stranger = await dashboard.owner(), await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        await store(dashboard, hook, [S])
        for q in ("", "x" * 201):
            response = await owner.client.get(
                f"/api/v1/webhooks/{hook.name}/events", params={"q": q}
            )
            assert response.status_code == 422
            assert response.json()["detail"][0]["loc"] == ["query", "q"]
        response = await stranger.client.get(
            f"/api/v1/webhooks/{hook.name}/events", params={"q": "ok"}
        )
        assert response.status_code == 404


class TestDetail:
    async def test_every_field_and_the_attempts(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner, forward_url="http://127.0.0.1:9/in")
        headers = {"content-type": "application/octet-stream", "x.dotted": "1", "$x": "2"}
        event = create_event(
            webhook_id=hook.id, webhook_name=hook.name, username=owner.username,
            body=b"\xff\xfe\x00raw", request_headers=headers,
            content_type="application/octet-stream", forward_url="http://127.0.0.1:9/in",
        )  # fmt: skip
        await dashboard.runtime.events.upsert(event)
        started = event.created_at + timedelta(milliseconds=5)
        failed = create_attempt(
            event, status_code=503, response_body=b"busy", will_retry=True,
            next_retry_at=started + timedelta(seconds=1), latency_ms=12.5, started_at=started,
        )  # fmt: skip
        retried = create_attempt(
            event, chain_id=failed.chain_id, number=2, trigger=AttemptTrigger.RETRY,
            status_code=200, response_body=b"\x80ok", response_body_truncated=True,
            started_at=started + timedelta(seconds=1),
        )  # fmt: skip
        await dashboard.runtime.attempts.upsert_many([retried, failed])
        await dashboard.runtime.events.apply_attempts([failed, retried])

        response = await owner.client.get(f"/api/v1/events/{event.id}")
        assert response.status_code == 200
        body = response.json()
        attempts = body.pop("attempts")
        assert body == {
            "id": event.id, "request_id": event.request_id, "webhook_id": hook.id,
            "webhook_name": hook.name, "client_ip": event.client_ip,
            "request_headers": headers, "request_body": base64.b64encode(event.body).decode(),
            "request_body_encoding": "base64", "content_type": "application/octet-stream",
            "signature_valid": None, "created_at": isoformat(event.created_at),
            "status": "success", "rejected_reason": None, "forward_url": "http://127.0.0.1:9/in",
            "verification": None, "handshake": None, "deliveries": [],
        }  # fmt: skip
        assert [a["id"] for a in attempts] == [failed.id, retried.id]
        first, second = attempts
        assert first == {
            "id": failed.id, "chain_id": failed.chain_id, "number": 1, "trigger": "initial",
            "url": failed.url, "started_at": isoformat(started), "status_code": 503,
            "response_headers": {"content-type": "text/plain"}, "response_body": "busy",
            "response_body_encoding": "utf8", "response_body_truncated": False,
            "latency_ms": 12.5, "error": None, "will_retry": True,
            "next_retry_at": isoformat(started + timedelta(seconds=1)),
        }  # fmt: skip
        assert (second["trigger"], second["number"], second["will_retry"]) == ("retry", 2, False)
        assert second["next_retry_at"] is None
        assert (second["response_body"], second["response_body_encoding"]) == ("gG9r", "base64")
        assert second["response_body_truncated"] is True

    async def test_deliveries_with_their_own_attempts(self, dashboard: Dashboard) -> None:
        """A routed event: one delivery per route, each with its status, reason and attempts
        (oldest first); ``attempts`` still lists every attempt."""
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        event = create_event(
            webhook_id=hook.id, webhook_name=hook.name, username=owner.username, forward_url=None
        )
        events, attempts = dashboard.runtime.events, dashboard.runtime.attempts
        await events.upsert(event)
        at = event.created_at + timedelta(milliseconds=5)
        billing = create_delivery(event, route="billing", status=DeliveryStatus.DELIVERING, at=at)
        audit = create_delivery(
            event, route="audit", status=DeliveryStatus.FILTERED, reason="/body/type: $eq", at=at
        )
        routed = {"delivery_id": billing.id, "route": "billing", "destination": "billing-api"}
        failed = create_attempt(
            event, status_code=503, will_retry=True, started_at=at, **routed,
            next_retry_at=at + timedelta(seconds=10),
        )  # fmt: skip
        retried = create_attempt(
            event, chain_id=failed.chain_id, number=2, trigger=AttemptTrigger.RETRY,
            status_code=200, started_at=at + timedelta(seconds=10), **routed,
        )  # fmt: skip
        await record_batch(events, attempts, [], [failed], None, [billing, audit])
        pending = (await owner.client.get(f"/api/v1/events/{event.id}")).json()
        assert pending["status"] == "pending"
        await record_batch(events, attempts, [], [retried])

        body = (await owner.client.get(f"/api/v1/events/{event.id}")).json()
        assert body["status"] == "success"
        assert [a["id"] for a in body["attempts"]] == [failed.id, retried.id]
        by_route = {d["route"]: d for d in body["deliveries"]}
        assert by_route["audit"] == {
            "id": audit.id, "route": "audit", "destination": "audit-api", "status": "filtered",
            "reason": "/body/type: $eq", "updated_at": isoformat(at), "transform": None,
            "attempts": [],
        }  # fmt: skip
        delivered = by_route["billing"]
        assert (delivered["id"], delivered["destination"]) == (billing.id, "billing-api")
        assert (delivered["status"], delivered["reason"]) == ("success", None)
        assert delivered["updated_at"] == isoformat(retried.started_at)
        assert delivered["attempts"] == body["attempts"]
        assert len(body["deliveries"]) == 2

    async def test_utf8_body_and_no_attempts(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        [event] = await store(dashboard, hook, [S])
        body = (await owner.client.get(f"/api/v1/events/{event.id}")).json()
        assert (body["request_body"], body["request_body_encoding"]) == ('{"ok": true}', "utf8")
        assert body["attempts"] == []

    async def test_another_owners_missing_or_stub_event_is_404(self, dashboard: Dashboard) -> None:
        owner, stranger = await dashboard.owner(), await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        [event] = await store(dashboard, hook, [S])
        stub_only = create_event(username=owner.username)
        await dashboard.runtime.events.apply_attempts([create_attempt(stub_only)])
        routed = create_event(username=owner.username, webhook_id=hook.id, forward_url=None)
        delivered_stub = create_event(username=owner.username)
        events, attempts = dashboard.runtime.events, dashboard.runtime.attempts
        await events.upsert(routed)
        deliveries = [create_delivery(routed), create_delivery(delivered_stub)]
        await record_batch(events, attempts, [], [], None, deliveries)
        for who, event_id in [
            (stranger, event.id), (owner, new_id(IdPrefix.EVENT)), (owner, stub_only.id),
            (stranger, routed.id), (owner, delivered_stub.id),
        ]:  # fmt: skip
            for path in [f"/api/v1/events/{event_id}", f"/api/v1/events/{event_id}/export"]:
                response = await who.client.get(path)
                assert response.status_code == 404, path
                assert response.json() == {
                    "error": "Event not found", "message": f"no event {event_id!r}",
                    "eventId": event_id,
                }  # fmt: skip

    async def test_single_export_is_the_detail_as_a_download(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        [event] = await store(dashboard, hook, [F])
        await dashboard.runtime.attempts.upsert(create_attempt(event, status_code=400))
        detail = await owner.client.get(f"/api/v1/events/{event.id}")
        export = await owner.client.get(f"/api/v1/events/{event.id}/export")
        assert export.status_code == 200
        assert export.headers["content-type"] == "application/json"
        assert export.headers["content-disposition"] == f'attachment; filename="{event.id}.json"'
        assert export.json() == detail.json()
        assert len(export.json()["attempts"]) == 1


class TestVerificationVerdict:
    async def test_detail_list_and_export_carry_the_verdict_and_the_handshake(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        common = dict(webhook_id=hook.id, webhook_name=hook.name, username=owner.username)
        recorded = create_event(
            **common, signature_valid=False,
            verification=EventVerification(
                type=VerificationType.STRIPE, result=VerificationResult.INVALID,
                reason=InvalidReason.TIMESTAMP_OUT_OF_TOLERANCE,
            ),
        )  # fmt: skip
        previous = create_event(
            **common, signature_valid=True,
            verification=EventVerification(
                type=VerificationType.STRIPE, result=VerificationResult.VALID,
                secret=MatchedSecret.PREVIOUS,
            ),
        )  # fmt: skip
        handshake = create_event(
            **common, handshake=HandshakeKind.SLACK_URL_VERIFICATION,
            verification=EventVerification(
                type=VerificationType.SLACK, result=VerificationResult.VALID,
                secret=MatchedSecret.CURRENT,
            ),
        )  # fmt: skip
        for event in (recorded, previous, handshake):
            await dashboard.runtime.events.upsert(event)

        detail = (await owner.client.get(f"/api/v1/events/{recorded.id}")).json()
        assert detail["verification"] == {
            "type": "stripe", "result": "invalid", "secret": None,
            "reason": "timestamp_out_of_tolerance",
        }  # fmt: skip
        assert detail["handshake"] is None
        listed = {e["id"]: e for e in (await page(owner, hook.name))["items"]}
        assert listed[previous.id]["verification"] == {
            "type": "stripe", "result": "valid", "secret": "previous", "reason": None,
        }  # fmt: skip
        assert listed[handshake.id]["handshake"] == "url_verification"
        assert listed[recorded.id]["verification"]["reason"] == "timestamp_out_of_tolerance"
        export = await owner.client.get(f"/api/v1/webhooks/{hook.name}/events/export")
        exported = {e["id"]: e for e in export.json()}
        assert exported[handshake.id]["handshake"] == "url_verification"
        assert exported[handshake.id]["verification"]["secret"] == "current"
        assert exported[recorded.id]["verification"] == detail["verification"]


class TestWebhookExport:
    async def test_streams_the_filtered_events_oldest_first(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook, other = await hook_of(dashboard, owner), await hook_of(dashboard, owner)
        made = await store(dashboard, hook, [S, F, P, F, S, F])
        await store(dashboard, other, [F])
        for status, kept in [("failed", {F}), ("pending", {P}), ("all", {S, F, P})]:
            async with owner.client.stream(
                "GET", f"/api/v1/webhooks/{hook.name}/events/export", params={"status": status}
            ) as response:
                assert response.status_code == 200
                assert response.headers["content-type"] == "application/json"
                assert response.headers["content-disposition"] == (
                    f'attachment; filename="{hook.name}-events-{status}.json"'
                )
                raw = await response.aread()
            exported = json.loads(raw)
            assert [e["id"] for e in exported] == [e.id for e in made if e.status in kept]
        first = exported[0]
        assert "attempts" not in first
        assert (first["request_body"], first["request_headers"]) == (
            made[0].body.decode(), made[0].request_headers,
        )  # fmt: skip
        assert first["created_at"] == isoformat(made[0].created_at)

    async def test_an_empty_export_is_an_empty_array(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        response = await owner.client.get(f"/api/v1/webhooks/{hook.name}/events/export")
        assert (response.status_code, response.json()) == (200, [])

    async def test_another_owners_webhook_is_404_before_the_stream(
        self, dashboard: Dashboard
    ) -> None:
        owner, stranger = await dashboard.owner(), await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        await store(dashboard, hook, [S])
        for who, name in [(stranger, hook.name), (owner, "missing")]:
            response = await who.client.get(f"/api/v1/webhooks/{name}/events/export")
            assert response.status_code == 404
            assert response.json()["error"] == "Webhook not found"
            assert "content-disposition" not in response.headers

    async def test_service_count_matches_the_export(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        await store(dashboard, hook, [S, F, P, F])
        service = get_events(dashboard.runtime)
        counts = [await service.count(owner.username, hook.name, s) for s in StatusFilter]
        assert counts == [4, 1, 2, 1]  # all, success, failed, pending


EXPORT_BOOK_PAGES = 2
EXPORT_SIZE = 12 * EXPORT_BOOK_PAGES * PAGE_SIZE + 37
"""Twelve books of two pages and a part-filled thirteenth: the export crosses every kind of
boundary (page, book, the last page's end). Its memory at 10k, 100k and 1M events is measured in
``scripts/bench_store.py`` (peak Python memory of the export), not asserted here."""


@pytest.fixture
async def big_dashboard(
    dashboard_settings: DashboardSettings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Dashboard, Any]]:
    """A dashboard on a database of its own, with books of ``EXPORT_BOOK_PAGES`` pages."""
    monkeypatch.setattr("hookbay_common.db.events.books.BOOK_PAGES", EXPORT_BOOK_PAGES)
    name = f"hookbay_export_{uuid.uuid4().hex[:8]}"
    base = dashboard_settings.mongo_url.rsplit("/", 1)[0]
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(base, tz_aware=True)
    try:
        async with serve_dashboard(
            dashboard_settings.model_copy(update={"mongo_url": f"{base}/{name}"})
        ) as served:
            yield served, mongo[name]
    finally:
        await mongo.drop_database(name)
        await mongo.close()


class TestLargeExport:
    async def test_streams_every_event_in_order_across_books(
        self, big_dashboard: tuple[Dashboard, Any]
    ) -> None:
        dashboard, _ = big_dashboard
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        start = utcnow() - timedelta(days=1)
        expected: list[str] = []
        for first in range(0, EXPORT_SIZE, 1000):
            docs = []
            for i in range(first, min(first + 1000, EXPORT_SIZE)):
                event = create_event(
                    webhook_id=hook.id, webhook_name=hook.name, username=owner.username,
                    created_at=start + timedelta(milliseconds=i), request_headers={},
                    body=b"x", forward_url=None, status=EventStatus.SUCCESS,
                )  # fmt: skip
                expected.append(event.id)
                docs.append(event)
            await dashboard.runtime.events.upsert_many(docs)

        chunks = 0
        body = b""
        async with owner.client.stream(
            "GET", f"/api/v1/webhooks/{hook.name}/events/export", timeout=300
        ) as response:
            assert response.status_code == 200
            async for chunk in response.aiter_bytes():
                chunks += 1
                body += chunk

        exported = json.loads(body)
        assert [e["id"] for e in exported] == expected
        assert chunks > 1  # written in parts, not built whole


class TestOverview:
    async def test_figures_per_webhook_from_the_stats_and_recent_events(
        self, dashboard: Dashboard
    ) -> None:
        """The counts are the stats of the current UTC hour and the 23 before it (a bucket 30
        hours old is left out, another owner's never counted), one point per hour; the last
        event's time and the newest events come from the event store."""
        owner, stranger = await dashboard.owner(), await dashboard.owner()
        busy = await hook_of(dashboard, owner, name="busy")
        quiet = await hook_of(dashboard, owner, name="quiet")
        idle = await hook_of(dashboard, owner, name="idle", active=False)
        other = await hook_of(dashboard, stranger, name="busy")
        now = utcnow()
        hour = int(now.timestamp()) // HOUR * HOUR
        written = {
            hour: Counts(received=5, rejected=2, delivered=3, failed=1, attempts=5, retried=1),
            hour - 5 * HOUR: Counts(received=1, delivered=1, attempts=1),
            hour - 30 * HOUR: Counts(received=100, delivered=100, attempts=100),
        }
        await dashboard.runtime.stats.write(
            [Bucket(busy.id, owner.username, "hour", h, c) for h, c in written.items()]
            + [Bucket(other.id, stranger.username, "hour", hour, Counts(received=9))]
        )
        old = await store(dashboard, busy, [F, F], start=now - timedelta(hours=30))
        # pending just before the window (it starts after now - 24 h) and just inside it (it
        # starts at or before now - 23 h): one page, cut by the window's start
        edges = [
            *await store(dashboard, busy, [P], start=now - timedelta(hours=24, minutes=1)),
            *await store(dashboard, busy, [P], start=now - timedelta(hours=23, minutes=-1)),
        ]
        recent = await store(dashboard, busy, [S, S, S, F, P], start=now - timedelta(hours=2))
        quiet_events = await store(dashboard, quiet, [P], start=now - timedelta(hours=25))
        await store(dashboard, other, [S, S])

        response = await owner.client.get("/api/v1/overview")

        assert response.status_code == 200
        body = response.json()
        since = datetime.fromisoformat(body["stats_since"])
        assert since.timestamp() % HOUR == 0
        assert now - timedelta(hours=24) < since <= now - timedelta(hours=23)
        rows = {row["name"]: row for row in body["webhooks"]}
        assert list(rows) == ["busy", "idle", "quiet"]
        assert rows["busy"]["stats_24h"] == {
            "received": 6, "rejected": 2, "delivered": 4, "failed": 1, "retried": 1,
            "replays": 0, "attempts": 6, "success_rate": 0.8,
        }  # fmt: skip
        assert rows["busy"]["counts_24h"] == {
            "success": 4, "failed": 3, "pending": 2, "total": 8,
        }  # fmt: skip
        assert rows["busy"]["pending_24h"] == 2  # the one inside the window, and the newest
        assert rows["busy"]["success_rate_24h"] == 0.8
        assert (rows["busy"]["active"], rows["idle"]["active"]) == (True, False)
        assert rows["busy"]["last_event_at"] == isoformat(recent[-1].created_at)
        assert rows["quiet"]["last_event_at"] == isoformat(quiet_events[-1].created_at)
        assert rows["idle"]["last_event_at"] is None
        for row in rows.values():
            starts = [datetime.fromisoformat(p["start"]) for p in row["hourly_24h"]]
            assert starts == [since + timedelta(hours=h) for h in range(24)]
        received = {
            p["start"]: (p["received"], p["delivered"])
            for p in rows["busy"]["hourly_24h"]
            if p["received"]
        }
        assert received == {
            isoformat(datetime.fromtimestamp(hour, UTC)): (5, 3),
            isoformat(datetime.fromtimestamp(hour - 5 * HOUR, UTC)): (1, 1),
        }
        for name in ("quiet", "idle"):
            assert set(rows[name]["stats_24h"].values()) == {0, None}
            assert rows[name]["counts_24h"] == {"success": 0, "failed": 0, "pending": 0, "total": 0}
            assert rows[name]["pending_24h"] == 0  # quiet's pending event is 25 hours old
            assert rows[name]["success_rate_24h"] is None
            assert {p["received"] for p in rows[name]["hourly_24h"]} == {0}
        mine = [*old, *edges, *recent, *quiet_events]
        assert ids(body["recent_events"]) == newest_first(mine)[:10]
        assert set(body["recent_events"][0]) == SUMMARY_FIELDS
        assert idle.id not in {e["webhook_id"] for e in body["recent_events"]}

    async def test_pending_counts_the_windows_events_still_waiting(
        self, dashboard: Dashboard
    ) -> None:
        """From the event store, not the stats (none written here): an event that ends its
        delivery leaves the count."""
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        waiting = await store(dashboard, hook, [P, P, P, S, F], start=utcnow() - timedelta(hours=3))

        async def pending() -> tuple[int, int]:
            [row] = (await owner.client.get("/api/v1/overview")).json()["webhooks"]
            return row["pending_24h"], row["counts_24h"]["pending"]

        assert await pending() == (3, 3)
        await dashboard.runtime.events.set_status(waiting[0].id, EventStatus.SUCCESS)
        await dashboard.runtime.events.set_status(waiting[1].id, EventStatus.FAILED)
        assert await pending() == (1, 1)

    async def test_recent_events_across_pages(self, dashboard: Dashboard) -> None:
        """The newest page holding fewer than ten events, the page below completes the ten."""
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        below = await store(
            dashboard, hook, [S] * PAGE_SIZE, start=utcnow() - timedelta(hours=30),
            step=timedelta(minutes=1),
        )  # fmt: skip
        top = await store(dashboard, hook, [F] * 4, start=utcnow() - timedelta(minutes=5))
        body = (await owner.client.get("/api/v1/overview")).json()
        assert ids(body["recent_events"]) == newest_first([*below, *top])[:10]
        [row] = body["webhooks"]
        assert row["last_event_at"] == isoformat(top[-1].created_at)

    async def test_recent_events_stop_at_ten(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        made = await store(dashboard, hook, [S] * 12)
        body = (await owner.client.get("/api/v1/overview")).json()
        assert ids(body["recent_events"]) == newest_first(made)[:10]


class TestListenAttempts:
    """``POST /events/{id}/attempts``: a local answer seen by ``hookbay listen``."""

    def answer(self, **overrides: Any) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "session_id": "lst_0123456789", "number": 1, "url": "http://localhost:3000/hook",
            "started_at": isoformat(utcnow()), "status_code": 201, "latency_ms": 4.5,
            "response_headers": {"content-type": "text/plain"},
            "response_body": base64.b64encode(b"x" * 70_000).decode(),
        }  # fmt: skip
        return {**fields, **overrides}

    async def test_recorded_once_with_trigger_listen_and_the_status_kept(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        hook = await hook_of(dashboard, owner)
        (event,) = await store(dashboard, hook, [P])
        path = f"/api/v1/events/{event.id}/attempts"
        first = await owner.client.post(path, json=self.answer())
        again = await owner.client.post(path, json=self.answer())
        assert (first.status_code, again.status_code) == (201, 201)
        assert first.json()["id"] == again.json()["id"]
        attempt = first.json()
        assert (attempt["trigger"], attempt["status_code"], attempt["number"]) == ("listen", 201, 1)
        assert attempt["response_body_truncated"] is True
        assert attempt["response_body"] == "x" * 64 * 1024  # UTF-8 text, as the detail shows it
        detail = (await owner.client.get(f"/api/v1/events/{event.id}")).json()
        assert [a["trigger"] for a in detail["attempts"]] == ["listen"]
        assert detail["status"] == "pending"  # a laptop's answer is not a delivery
        assert (await page(owner, hook.name))["items"][0]["status"] == "pending"

    async def test_another_owners_event_is_404_and_bad_bodies_are_refused(
        self, dashboard: Dashboard
    ) -> None:
        owner, stranger = await dashboard.owner(), await dashboard.owner()
        (event,) = await store(dashboard, await hook_of(dashboard, owner), [P])
        path = f"/api/v1/events/{event.id}/attempts"
        response = await stranger.client.post(path, json=self.answer())
        assert response.status_code == 404
        for not_base64 in ("%%", "\u00e9t\u00e9"):  # not the alphabet; beyond ASCII
            refused = await owner.client.post(path, json=self.answer(response_body=not_base64))
            assert refused.status_code == 400, refused.text
            assert refused.json()["message"] == "response_body is not base64"
        bad_session = self.answer(session_id="../../x")
        assert (await owner.client.post(path, json=bad_session)).status_code == 422
        async with dashboard.client() as anonymous:
            assert (await anonymous.post(path, json=self.answer())).status_code == 401

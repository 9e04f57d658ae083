"""Repositories against the real Mongo-wire server (FerretDB locally, MongoDB in production)."""

from __future__ import annotations

import asyncio
import base64
from datetime import datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import SecretStr
from pymongo.errors import DuplicateKeyError

from hookbay_common.clock import utcnow
from hookbay_common.db import (
    AttemptRepository,
    Collections,
    Database,
    DestinationRepository,
    EventCursor,
    EventRepository,
    LockRepository,
    TokenRepository,
    UserRepository,
    WebhookRepository,
    migrate,
)
from hookbay_common.db import events as events_package
from hookbay_common.db.client import INDEXES
from hookbay_common.db.events import (
    PAGE_SIZE,
    ExpiredPage,
    PageSummary,
    attempt_to_document,
    event_to_document,
    migrate_event_layout,
    record_batch,
)
from hookbay_common.db.events import bulk as bulk_module
from hookbay_common.db.events.layout import page_id
from hookbay_common.db.events.summaries import _heal_at, _summary
from hookbay_common.errors import (
    DestinationAlreadyExists,
    DestinationNotFound,
    TokenNotFound,
    UserAlreadyExists,
    UserNotFound,
    WebhookAlreadyExists,
    WebhookNotFound,
)
from hookbay_common.ids import IdPrefix, derived_id, new_id
from hookbay_common.models import (
    ApiToken,
    AttemptTrigger,
    Event,
    EventStatus,
    RateLimit,
    RatePeriod,
    RejectedReason,
    Role,
)
from hookbay_common.secrets_box import SecretBox, hash_api_token
from tests.support.factories import (
    TEST_SECRET_KEY,
    create_attempt,
    create_destination,
    create_event,
    create_route,
    create_user,
    create_webhook,
    unique_name,
)

BOX = SecretBox(TEST_SECRET_KEY)


class TestEventsPackage:
    def test_the_public_names_resolve_from_the_package(self) -> None:
        assert all(hasattr(events_package, name) for name in events_package.__all__)
        assert (AttemptRepository, EventCursor, EventRepository) == (
            events_package.AttemptRepository,
            events_package.EventCursor,
            events_package.EventRepository,
        )


class TestMigrate:
    async def test_idempotent_and_complete(self, db: Database) -> None:
        await migrate(db)
        await migrate(db)
        for collection, indexes in INDEXES.items():
            names = {info["name"] async for info in await db[collection].list_indexes()}
            assert {index.document["name"] for index in indexes} <= names


class TestUserRepository:
    async def test_create_get_update_list(self, db: Database) -> None:
        users = UserRepository(db)
        user = await users.create(create_user())
        assert await users.get(user.username) == user
        changed = await users.update(user.username, plan="pro", role=Role.ADMIN, password_hash="h")
        assert (changed.plan, changed.role, changed.password_hash) == ("pro", Role.ADMIN, "h")
        assert changed.updated_at >= user.updated_at
        assert user.username in [u.username for u in await users.list_all()]
        assert [u.username for u in await users.changed_since(changed.updated_at)].count(
            user.username
        ) == 1

    async def test_duplicate_and_missing(self, db: Database) -> None:
        users = UserRepository(db)
        user = await users.create(create_user())
        with pytest.raises(UserAlreadyExists):
            await users.create(create_user(username=user.username))
        assert await users.get(unique_name()) is None
        with pytest.raises(UserNotFound):
            await users.require(unique_name())
        with pytest.raises(UserNotFound):
            await users.update(unique_name(), plan="pro")


class TestWebhookRepository:
    async def test_create_get_update_delete(self, db: Database) -> None:
        hooks = WebhookRepository(db, BOX)
        hook = await hooks.create(
            create_webhook(secret=SecretStr("sig-secret-1"), forward_url="http://x/")
        )
        assert await hooks.get(hook.username, hook.name) == hook
        assert await hooks.get_by_id(hook.id) == hook
        changed = await hooks.update(
            hook.username, hook.name, active=False, secret=None, forward_url=None
        )
        assert (changed.active, changed.secret, changed.forward_url) == (False, None, None)
        rotated = await hooks.update(hook.username, hook.name, secret=SecretStr("sig-secret-2"))
        assert rotated.secret is not None
        assert rotated.secret.get_secret_value() == "sig-secret-2"
        assert rotated.active is False
        await hooks.delete(hook.username, hook.name)
        assert await hooks.get(hook.username, hook.name) is None
        with pytest.raises(WebhookNotFound):
            await hooks.delete(hook.username, hook.name)

    async def test_secret_is_encrypted_at_rest(self, db: Database) -> None:
        hook = await WebhookRepository(db, BOX).create(
            create_webhook(secret=SecretStr("plain-sig-secret"))
        )
        raw = await db[Collections.WEBHOOKS].find_one({"_id": hook.id})
        assert raw is not None
        assert "plain-sig-secret" not in str(raw)

    async def test_name_unique_per_owner_only(self, db: Database) -> None:
        hooks = WebhookRepository(db, BOX)
        hook = await hooks.create(create_webhook())
        with pytest.raises(WebhookAlreadyExists):
            await hooks.create(create_webhook(username=hook.username, name=hook.name))
        await hooks.create(create_webhook(name=hook.name))  # another owner may use the name

    async def test_list_for_owner_sorted_by_name(self, db: Database) -> None:
        hooks = WebhookRepository(db, BOX)
        owner = unique_name("u")
        for name in ("zeta", "alpha", "mid"):
            await hooks.create(create_webhook(username=owner, name=name))
        assert [h.name for h in await hooks.list_for_owner(owner)] == ["alpha", "mid", "zeta"]
        with pytest.raises(WebhookNotFound):
            await hooks.update(owner, "missing", active=True)


class TestWebhookRoutes:
    async def test_a_webhook_stored_before_routes_reads_without_routes(self, db: Database) -> None:
        """Today's layout: a document without ``routes`` (no migration needed)."""
        hooks = WebhookRepository(db, BOX)
        hook = create_webhook()
        document = hooks._to_document(hook)
        assert "routes" not in document
        await db[Collections.WEBHOOKS].insert_one(document)
        assert (await hooks.require(hook.username, hook.name)).routes == ()

    async def test_routes_are_replaced_in_order_only_if_unchanged(self, db: Database) -> None:
        hooks = WebhookRepository(db, BOX)
        hook = await hooks.create(create_webhook())
        routes = [
            create_route(
                name="b", filter={"body": {"$or": [{"a.b": 1}, {"c": {"$exist": False}}]}}
            ),
            create_route(name="a"),
        ]
        written = await hooks.replace_routes(hook, routes)
        assert written is not None
        assert written.routes == tuple(routes)
        assert written.updated_at > hook.updated_at
        assert await hooks.require(hook.username, hook.name) == written
        assert await hooks.replace_routes(hook, []) is None  # read before the last write
        emptied = await hooks.replace_routes(written, [])
        assert emptied is not None
        assert emptied.routes == ()
        raw = await db[Collections.WEBHOOKS].find_one({"_id": hook.id})
        assert raw is not None
        assert "routes" not in raw
        await hooks.delete(hook.username, hook.name)
        with pytest.raises(WebhookNotFound):
            await hooks.replace_routes(emptied, routes)

    async def test_other_changes_keep_the_routes(self, db: Database) -> None:
        hooks = WebhookRepository(db, BOX)
        hook = await hooks.create(create_webhook(routes=(create_route(),)))
        changed = await hooks.update(
            hook.username, hook.name, forward_url="http://x/", active=False
        )
        assert changed.routes == hook.routes


class TestDestinationRepository:
    async def test_create_get_update_delete(self, db: Database) -> None:
        destinations = DestinationRepository(db, BOX)
        created = await destinations.create(
            create_destination(headers={"authorization": SecretStr("Bearer sealed-value")})
        )
        assert await destinations.require(created.username, created.name) == created
        raw = await db[Collections.DESTINATIONS].find_one({"_id": created.id})
        assert raw is not None
        assert "sealed-value" not in str(raw)
        changed = await destinations.update(
            created.username, created.name,
            {"timeout_s": 3, "rate_limit": RateLimit(count=2, period=RatePeriod.MINUTE),
             "retry_schedule": ("0", "1s"), "headers": {}},
        )  # fmt: skip
        assert (changed.timeout_s, changed.retry_schedule, changed.headers) == (3, ("0", "1s"), {})
        assert changed.rate_limit == RateLimit(count=2, period=RatePeriod.MINUTE)
        assert [d.name for d in await destinations.list_for_owner(created.username)] == [
            created.name
        ]
        await destinations.delete(created.username, created.name)
        assert await destinations.get(created.username, created.name) is None
        with pytest.raises(DestinationNotFound):
            await destinations.delete(created.username, created.name)
        with pytest.raises(DestinationNotFound):
            await destinations.update(created.username, created.name, {"timeout_s": 4})

    async def test_name_unique_per_owner_only(self, db: Database) -> None:
        destinations = DestinationRepository(db, BOX)
        first = await destinations.create(create_destination())
        with pytest.raises(DestinationAlreadyExists):
            await destinations.create(create_destination(username=first.username, name=first.name))
        await destinations.create(create_destination(name=first.name))


class TestTokenRepository:
    async def test_find_list_delete(self, db: Database) -> None:
        tokens = TokenRepository(db)
        owner = unique_name("u")
        record = ApiToken(
            id=new_id(IdPrefix.TOKEN), username=owner, name="ci", token_hash=hash_api_token("hbk_abc"),
            created_at=create_user().created_at,
        )  # fmt: skip
        await tokens.create(record)
        found = await tokens.find_by_token("hbk_abc")
        assert found is not None
        assert found.id == record.id
        assert await tokens.find_by_token("hbk_other") is None
        assert [t.id for t in await tokens.list_for_owner(owner)] == [record.id]
        with pytest.raises(TokenNotFound):
            await tokens.delete("someone-else", record.id)
        await tokens.delete(owner, record.id)
        assert await tokens.list_for_owner(owner) == []

    async def test_last_used_moves_at_most_once_a_minute(self, db: Database) -> None:
        """A client polling with a token reads it; the use is written when it is new or the
        one stored is a minute old."""
        tokens = TokenRepository(db)
        secret = f"hbk_{unique_name('t')}"
        record = ApiToken(
            id=new_id(IdPrefix.TOKEN), username=unique_name("u"), name="ci",
            token_hash=hash_api_token(secret), created_at=create_user().created_at,
        )  # fmt: skip
        await tokens.create(record)

        async def stored() -> datetime | None:
            doc = await db[Collections.API_TOKENS].find_one({"_id": record.id})
            assert doc is not None
            return doc.get("last_used_at")

        first = await tokens.find_by_token(secret)
        assert first is not None
        assert first.last_used_at is not None
        assert await stored() == first.last_used_at
        again = await tokens.find_by_token(secret)
        assert again is not None
        assert await stored() == again.last_used_at == first.last_used_at  # no write
        old = first.last_used_at - timedelta(minutes=2)
        await db[Collections.API_TOKENS].update_one(
            {"_id": record.id}, {"$set": {"last_used_at": old}}
        )
        later = await tokens.find_by_token(secret)
        assert later is not None
        assert later.last_used_at is not None
        assert later.last_used_at > first.last_used_at
        assert await stored() == later.last_used_at

    async def test_token_hash_unique(self, db: Database) -> None:
        tokens = TokenRepository(db)
        made = create_user().created_at
        await tokens.create(
            ApiToken(
                id=new_id(IdPrefix.TOKEN),
                username="a",
                name="x",
                token_hash="h" + unique_name(),
                created_at=made,
            )
        )
        dup = "dup" + unique_name()
        await tokens.create(
            ApiToken(
                id=new_id(IdPrefix.TOKEN), username="a", name="x", token_hash=dup, created_at=made
            )
        )
        with pytest.raises(DuplicateKeyError):
            await tokens.create(
                ApiToken(
                    id=new_id(IdPrefix.TOKEN),
                    username="b",
                    name="y",
                    token_hash=dup,
                    created_at=made,
                )
            )


class TestEventRepository:
    async def test_headers_with_dots_and_dollars_round_trip(self, db: Database) -> None:
        events = EventRepository(db)
        headers = {"x.dotted.name": "1", "$weird": "2", "x-$mid": "$v.a.l", "a": "x, y"}
        event = create_event(request_headers=headers)
        await events.upsert(event)
        stored = await events.get(event.id)
        assert stored is not None
        assert stored.request_headers == headers
        assert list(stored.request_headers) == list(headers)

    @pytest.mark.parametrize(
        "body", [b'{"a": "\xc3\xa9"}', b"\xff\xfe\x00binary", b"", b'{"a": "x\x00y"}']
    )
    async def test_body_round_trip(self, db: Database, body: bytes) -> None:
        events = EventRepository(db)
        event = create_event(body=body)
        await events.upsert(event)
        stored = await events.get_by_request_id(event.request_id)
        assert stored == event

    async def test_invalid_utf8_is_stored_as_base64(self) -> None:
        doc = event_to_document(create_event(body=b"\xff\x00"))
        assert doc["request_body_encoding"] == "base64"
        assert base64.b64decode(doc["request_body"]) == b"\xff\x00"

    async def test_utf8_with_a_nul_is_stored_as_base64(self) -> None:
        """Valid UTF-8, but the store refuses a NUL in text."""
        doc = event_to_document(create_event(body=b"x\x00y"))
        assert doc["request_body_encoding"] == "base64"
        assert base64.b64decode(doc["request_body"]) == b"x\x00y"

    async def test_upsert_is_idempotent_and_keeps_status(self, db: Database) -> None:
        events = EventRepository(db)
        event = create_event()
        await events.upsert(event)
        await events.set_status(event.id, EventStatus.SUCCESS)
        await events.upsert(event)
        stored = await events.get(event.id)
        assert stored is not None
        assert stored.status is EventStatus.SUCCESS
        assert await db[Collections.EVENTS].count_documents({"request_id": event.request_id}) == 1

    async def test_request_id_is_unique(self, db: Database) -> None:
        events = EventRepository(db)
        event = create_event()
        await events.upsert(event)
        with pytest.raises(DuplicateKeyError):
            await events.upsert(create_event(request_id=event.request_id))

    async def test_list_newest_first_with_filter_and_cursor(self, db: Database) -> None:
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        base = create_event().created_at
        made = []
        for i in range(7):
            event = create_event(webhook_id=webhook_id, created_at=base + timedelta(seconds=i // 2))
            made.append(event)
            await events.upsert(event)
            if i % 3 == 0:
                await events.set_status(event.id, EventStatus.FAILED)
        expected = sorted(made, key=lambda e: (e.created_at, e.id), reverse=True)
        first = await events.heads_for_webhook(webhook_id, limit=3)
        assert [e.id for e in first.heads] == [e.id for e in expected[:3]]
        last = first.heads[-1]
        assert first.after == EventCursor(0, last.created_at, last.id)
        rest = await events.heads_for_webhook(webhook_id, limit=10, after=first.after)
        assert [e.id for e in rest.heads] == [e.id for e in expected[3:]]
        assert rest.after is None
        failed = await events.heads_for_webhook(webhook_id, status=EventStatus.FAILED)
        assert [e.id for e in failed.heads] == [e.id for e in expected if made.index(e) % 3 == 0]
        assert (await events.heads_for_webhook(new_id(IdPrefix.WEBHOOK))).heads == []

    async def test_changed_heads_follow_recordings_then_status_changes(self, db: Database) -> None:
        """A head is on the change page it was recorded on until its status changes, then on
        its webhook's top page of that moment (where a live stream that moved on finds it)."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        first = create_event(webhook_id=webhook_id)
        await events.upsert(first)
        assert [(s, r.id) for s, r in await events.changed_heads(webhook_id, 0)] == [(0, first.id)]
        later = [create_event(webhook_id=webhook_id) for _ in range(PAGE_SIZE + 5)]
        await events.upsert_many(later)
        await events.apply_attempts([create_attempt(first, status_code=200)])
        on_first_page = await events.changed_heads(webhook_id, 0)
        assert [s for s, _ in on_first_page] == list(range(1, PAGE_SIZE))  # recording order
        assert first.id not in {r.id for _, r in on_first_page}
        moved = [r for _, r in await events.changed_heads(webhook_id, 1) if r.id == first.id]
        assert [(r.page, r.status) for r in moved] == [(0, EventStatus.SUCCESS)]


class TestAttemptRepository:
    async def test_upsert_and_list_in_order(self, db: Database) -> None:
        attempts = AttemptRepository(db)
        event = create_event()
        first = create_attempt(
            event, status_code=500, response_headers={"x.y": "1"}, will_retry=True
        )
        second = create_attempt(
            event,
            number=2,
            started_at=first.started_at + timedelta(seconds=1),
            response_body=b"\xff",
        )
        await attempts.upsert(second)
        await attempts.upsert(first)
        await attempts.upsert(first)
        assert await attempts.list_for_event(event.id) == [first, second]
        assert await attempts.list_for_event(new_id(IdPrefix.EVENT)) == []


class TestEventStatusFromAttempts:
    async def test_latest_attempt_wins_in_any_order(self, db: Database) -> None:
        events = EventRepository(db)
        event = create_event(forward_url="http://127.0.0.1:9/h")
        chain = derived_id(IdPrefix.CHAIN, event.id)
        first = create_attempt(event, chain_id=chain, status_code=500, will_retry=True)
        second = create_attempt(event, chain_id=chain, number=2, status_code=200)
        await events.upsert(event)
        assert (await _status(events, event.id)) is EventStatus.PENDING
        await events.apply_attempts([second])
        await events.apply_attempts([first, second, first])  # stale and repeated: no effect
        assert (await _status(events, event.id)) is EventStatus.SUCCESS

    async def test_replay_chain_overrides_initial_chain(self, db: Database) -> None:
        events = EventRepository(db)
        event = create_event(forward_url="http://127.0.0.1:9/h")
        await events.upsert(event)
        initial = create_attempt(event, chain_id=derived_id(IdPrefix.CHAIN, event.id))
        failed = create_attempt(event, status_code=400, trigger=AttemptTrigger.REPLAY)
        await events.apply_attempts([initial, failed])
        assert (await _status(events, event.id)) is EventStatus.FAILED

    async def test_attempt_recorded_before_its_event(self, db: Database) -> None:
        events = EventRepository(db)
        event = create_event(forward_url="http://127.0.0.1:9/h")
        await events.apply_attempts([create_attempt(event, status_code=503)])
        assert await events.get(event.id) is None  # only a stub so far
        await events.upsert_many([event, event])
        stored = await events.get(event.id)
        assert stored is not None
        assert stored.status is EventStatus.FAILED
        assert stored.body == event.body

    async def test_only_the_events_with_a_stub_take_the_slow_way(
        self, db: Database, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """After a store outage most events of a batch meet their status stub; the others of the
        same insert chunk are inserted, not written again one by one."""
        events = EventRepository(db)
        hook = new_id(IdPrefix.WEBHOOK)
        batch = [
            create_event(webhook_id=hook, forward_url="http://127.0.0.1:9/h") for _ in range(12)
        ]
        stubbed = {1, 5, 6, 11}
        await events.apply_attempts(
            [create_attempt(batch[i], status_code=503) for i in sorted(stubbed)]
        )
        calls: list[int] = []
        real = bulk_module._upsert

        async def counted(collection: Any, statements: Any) -> None:
            calls.append(1)
            await real(collection, statements)

        monkeypatch.setattr(bulk_module, "_upsert", counted)
        await events.upsert_many(batch)
        assert len(calls) == len(stubbed)  # heads only: no body existed before
        for i, event in enumerate(batch):
            stored = await events.get(event.id)
            assert stored is not None
            assert stored.body == event.body
            assert stored.status is (EventStatus.FAILED if i in stubbed else EventStatus.PENDING)
        heads = await events.page_heads(hook, 0)
        assert sorted(h.id for h in heads) == sorted(e.id for e in batch)  # all on their page

    @pytest.mark.parametrize(
        ("overrides", "status"),
        [
            ({"forward_url": None}, EventStatus.SUCCESS),
            ({"forward_url": "http://127.0.0.1:9/h"}, EventStatus.PENDING),
            (
                {"forward_url": "http://127.0.0.1:9/h", "signature_valid": False,
                 "rejected_reason": RejectedReason.INVALID_SIGNATURE},
                EventStatus.FAILED,
            ),
        ],
    )  # fmt: skip
    async def test_initial_status(
        self, db: Database, overrides: dict[str, object], status: EventStatus
    ) -> None:
        events = EventRepository(db)
        event = create_event(**overrides)
        await events.upsert_many([event])
        assert (await _status(events, event.id)) is status


async def _status(events: EventRepository, event_id: str) -> EventStatus:
    stored = await events.get(event_id)
    assert stored is not None
    return stored.status


class TestLockRepository:
    async def test_of_many_taking_a_lapsed_lock_at_once_exactly_one_wins(
        self, db: Database
    ) -> None:
        locks = LockRepository(db)
        await locks.ensure_collection()
        name = unique_name("lock")
        now = utcnow()
        assert await locks.acquire(name, "crashed", now=now, lease_until=now) is not None
        later = now + timedelta(seconds=1)
        for round_ in range(3):
            taken = await asyncio.gather(*(
                locks.acquire(
                    name, f"h{round_}-{i}", now=later, lease_until=later + timedelta(seconds=60)
                )
                for i in range(8)
            ))  # fmt: skip
            winners = [lease for lease in taken if lease is not None]
            assert len(winners) == 1, taken
            (winner,) = winners
            current = await locks.get(name)
            assert current is not None
            assert current.holder == winner.holder
            assert await locks.renew(name, "crashed", lease_until=later) is False
            losers = [f"h{round_}-{i}" for i in range(8) if f"h{round_}-{i}" != winner.holder]
            for loser in losers:
                assert await locks.renew(name, loser, lease_until=later) is False
            assert await locks.release(name, winner.holder, now=now)  # lapsed for the next round
        assert await db.locks.count_documents({"name": name}) == 2  # older generations retired


class TestPagedLayout:
    async def test_pages_are_counted_on_every_write(self, db: Database) -> None:
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        made = [
            create_event(webhook_id=webhook_id, forward_url="http://127.0.0.1:9/h")
            for _ in range(PAGE_SIZE + 5)
        ]
        await events.upsert_many(made)
        await events.upsert_many(made[:3])  # consumed again: nothing changes
        await events.apply_attempts([create_attempt(made[0], status_code=200)])
        await events.apply_attempts([create_attempt(made[-1], status_code=500)])
        summaries = await events.summaries(webhook_id=webhook_id)
        assert [(s.page, s.total) for s in summaries] == [(0, PAGE_SIZE), (1, 5)]
        assert summaries[0].counts[EventStatus.SUCCESS] == 1
        assert summaries[1].counts[EventStatus.FAILED] == 1
        assert await events.counts(webhook_id) == {
            EventStatus.PENDING: PAGE_SIZE + 3, EventStatus.SUCCESS: 1, EventStatus.FAILED: 1,
        }  # fmt: skip
        row = (await events.heads_for_webhook(webhook_id, limit=1)).heads[0]
        assert (row.id, row.last_status_code, row.body_size) == (
            made[-1].id, 500, len(made[-1].body),
        )  # fmt: skip

    async def test_a_batch_stores_events_with_their_attempts_status(self, db: Database) -> None:
        """The recorder's batch: an event whose attempt came with it is stored with its final
        status at once; written again (a crash before the commit), nothing changes."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        made = [
            create_event(webhook_id=webhook_id, forward_url="http://127.0.0.1:9/h")
            for _ in range(5)
        ]
        tried = [create_attempt(e, status_code=200 if i else 502) for i, e in enumerate(made)]
        later = create_attempt(made[0], number=2, status_code=204)  # the retry that succeeded
        for _ in range(2):
            await record_batch(events, attempts, made, [*tried, later])
        rows = (await events.heads_for_webhook(webhook_id)).heads
        assert {r.id: (r.status, r.last_status_code) for r in rows} == {
            e.id: (EventStatus.SUCCESS, 204 if i == 0 else 200) for i, e in enumerate(made)
        }
        assert await events.counts(webhook_id) == {
            EventStatus.SUCCESS: 5, EventStatus.PENDING: 0, EventStatus.FAILED: 0,
        }  # fmt: skip
        assert len(await attempts.list_for_event(made[0].id)) == 2

    async def test_a_counter_behind_its_pages_loses_nothing(self, db: Database) -> None:
        """Two writers at once can leave the counter behind the pages in use (FerretDB runs
        ``$inc`` as a read and a write): every event stays listed and exported."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        made = [create_event(webhook_id=webhook_id) for _ in range(PAGE_SIZE * 2 + 50)]
        await events.upsert_many(made)
        await db[Collections.EVENT_COUNTERS].update_one({"_id": webhook_id}, {"$set": {"seq": 50}})
        more = [create_event(webhook_id=webhook_id) for _ in range(10)]
        await EventRepository(db).upsert_many(more)  # another writer: numbers given, page 0 grows
        listed = await events.heads_for_webhook(webhook_id, limit=1000)
        assert len(listed.heads) == len(made) + len(more)
        exported = [e.id async for e, _ in events.stream_for_webhook(webhook_id)]
        assert sorted(exported) == sorted(e.id for e in made + more)
        assert sum((await events.counts(webhook_id)).values()) == len(made) + len(more)

    async def test_positions_are_reserved_a_page_at_a_time(self, db: Database) -> None:
        """A writer reserves the rest of the page its numbers fall on and hands them out from
        memory; once it forgets (its partitions moved) or another writer takes over, numbers
        come from the counter again, after the reserved ones: arrival order holds."""
        events = EventRepository(db)
        counters = db[Collections.EVENT_COUNTERS]
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow() - timedelta(minutes=5)
        made = [
            create_event(webhook_id=webhook_id, created_at=start + timedelta(seconds=i))
            for i in range(40)
        ]
        for chunk in (made[:10], made[10:20], made[20:30]):
            await events.upsert_many(chunk)
        counter = await counters.find_one({"_id": webhook_id})
        assert counter is not None
        assert counter["seq"] == PAGE_SIZE  # the page, reserved once
        heads = await db[Collections.EVENTS].find({"webhook_id": webhook_id}).to_list(None)
        assert sorted(h["seq"] for h in heads) == list(range(30))
        events.forget_writes()
        await events.upsert_many(made[30:35])  # the rest of page 0 is wasted: page 1
        await EventRepository(db).upsert_many(made[35:])  # another writer: page 2
        heads = await db[Collections.EVENTS].find({"webhook_id": webhook_id}).to_list(None)
        assert sorted(h["seq"] for h in heads if h["seq"] >= 30) == [
            *range(PAGE_SIZE, PAGE_SIZE + 5), *range(2 * PAGE_SIZE, 2 * PAGE_SIZE + 5)
        ]  # fmt: skip
        listed = await events.heads_for_webhook(webhook_id, limit=100)
        assert [h.id for h in listed.heads] == [e.id for e in reversed(made)]
        assert sum((await events.counts(webhook_id)).values()) == len(made)

    async def test_a_page_walk_stops_at_its_budget_with_a_cursor(self, db: Database) -> None:
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow() - timedelta(hours=1)
        made = [
            create_event(webhook_id=webhook_id, created_at=start + timedelta(seconds=i))
            for i in range(PAGE_SIZE * 4)
        ]
        await events.upsert_many(made)
        # a walk reads at most 2 pages (patched), however many rows were asked for
        seen, after, calls = [], None, 0
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("hookbay_common.db.events.listing.MAX_PAGES_PER_LIST", 2)
            while True:
                found = await events.heads_for_webhook(webhook_id, after=after, limit=1000)
                calls += 1
                seen += [h.id for h in found.heads]
                if found.after is None:
                    break
                after = found.after
        assert seen == [e.id for e in reversed(made)]
        assert calls == 2  # pages 3, 2, then 1, 0

    async def test_a_status_list_skips_the_pages_without_that_status(self, db: Database) -> None:
        """The books tell which pages hold the status: a list of the one pending event below
        pages of successes reads one page (the budget here), not every page above it."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow() - timedelta(hours=1)
        made = [
            create_event(
                webhook_id=webhook_id, created_at=start + timedelta(seconds=i),
                forward_url="http://127.0.0.1:9/h" if i == 3 else None,
            )
            for i in range(PAGE_SIZE * 4)
        ]  # fmt: skip
        await events.upsert_many(made)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("hookbay_common.db.events.listing.MAX_PAGES_PER_LIST", 1)
            found = await events.heads_for_webhook(webhook_id, status=EventStatus.PENDING)
        assert [h.id for h in found.heads] == [made[3].id]
        assert found.after is None

    async def test_the_date_range_bounds_lists_counts_and_exports(self, db: Database) -> None:
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow() - timedelta(days=3)
        made = [
            create_event(webhook_id=webhook_id, created_at=start + timedelta(minutes=i))
            for i in range(PAGE_SIZE * 2 + 20)
        ]
        await events.upsert_many(made)
        # ending on page 1 (below the top page 2); ending on page 0 (page 1 is after it)
        for since, until in [(made[50].created_at, made[180].created_at), (made[10].created_at, made[60].created_at)]:  # fmt: skip
            inside = [e for e in made if since <= e.created_at < until]
            listed = await events.heads_for_webhook(webhook_id, since=since, until=until, limit=500)
            assert [h.id for h in listed.heads] == [e.id for e in reversed(inside)]
            counts = await events.counts(webhook_id, since=since, until=until)
            assert sum(counts.values()) == len(inside)
            exported = [
                e.id
                async for e, _ in events.stream_for_webhook(webhook_id, since=since, until=until)
            ]
            assert exported == [e.id for e in inside]

    async def test_a_repeated_date_range_reads_only_the_book_it_lands_in(
        self, db: Database
    ) -> None:
        """Settled books' starts are remembered: the same ranges give the same lists from memory
        with fewer book reads, and after retention cut the bottom (the book it cut is no longer
        settled) the lists are still exact."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow() - timedelta(days=3)
        made = [
            create_event(webhook_id=webhook_id, created_at=start + timedelta(minutes=i))
            for i in range(PAGE_SIZE * 12)
        ]  # pages 0-11: books 0-5 of 2 pages (patched); books 1-3 settled
        reads: list[int] = []
        book = events._book

        async def counted(webhook: str, number: int) -> dict[int, PageSummary]:
            reads.append(number)
            return await book(webhook, number)

        async def listed(since: datetime, until: datetime) -> list[str]:
            found = await events.heads_for_webhook(webhook_id, since=since, until=until, limit=50)
            return [h.id for h in found.heads]

        def expected(since: datetime, until: datetime) -> list[str]:
            return [e.id for e in reversed(made) if since <= e.created_at < until][:50]

        ranges = [(made[i].created_at, made[i + 30].created_at) for i in (250, 450, 620, 1000)]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("hookbay_common.db.events.books.BOOK_PAGES", 2)
            patch.setattr(events, "_book", counted)
            await events.upsert_many(made)
            cold, warm = [], []
            for since, until in ranges:
                reads.clear()
                assert await listed(since, until) == expected(since, until)
                cold.append(sorted(reads))
            for since, until in ranges:
                reads.clear()
                assert await listed(since, until) == expected(since, until)
                warm.append(sorted(reads))
            # range 1 ends in book 2: the search reads books 2, 4, 3 and the walk book 1; again,
            # the settled book 3 comes from memory (4 is not settled, 2 is the one it lands in)
            assert (cold[1], warm[1]) == ([1, 2, 3, 4], [1, 2, 4])
            assert all(set(w) <= set(c) for w, c in zip(warm, cold, strict=True))
            for page in [p async for p in events.expired_pages(made[0].username, made[330].created_at)]:  # fmt: skip
                await events.delete_page(page)
            kept = made[330:]
            for since, until in [(made[320].created_at, made[340].created_at), *ranges]:
                inside = [e.id for e in reversed(kept) if since <= e.created_at < until][:50]
                assert await listed(since, until) == inside

    async def test_books_agree_with_the_page_summaries(self, db: Database) -> None:
        """Counts and bounds read from the books (100 pages each; 2 here) are those of the page
        summaries, through status changes, a rewrite and deletions."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow() - timedelta(days=1)
        made = [
            create_event(
                webhook_id=webhook_id, created_at=start + timedelta(seconds=i),
                forward_url="http://127.0.0.1:9/h",
            )
            for i in range(PAGE_SIZE * 5 + 30)
        ]  # fmt: skip
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("hookbay_common.db.events.books.BOOK_PAGES", 2)
            await events.upsert_many(made)
            await events.upsert_many(made[150:160])  # consumed again
            await events.apply_attempts(
                [
                    create_attempt(e, status_code=200 if i % 3 else 500)
                    for i, e in enumerate(made[::7])
                ]
            )
            expired = [
                p async for p in events.expired_pages(made[0].username, made[230].created_at)
            ]
            for page in expired:
                await events.delete_page(page)

        def as_tuples(summaries: list[PageSummary]) -> list[tuple[Any, ...]]:
            return [
                (s.page, s.first_at, s.last_at, s.counts, s.rejected, s.total) for s in summaries
            ]

        pages = [
            _summary(doc)
            async for doc in db[Collections.EVENT_PAGES].find({"webhook_id": webhook_id})
        ]
        from_books = await events.summaries(webhook_id=webhook_id)
        assert as_tuples(from_books) == as_tuples(sorted(pages, key=lambda s: s.page))
        assert [s.page for s in from_books] == [2, 3, 4, 5]  # pages 0, 1 gone; page 2 cut
        assert sum(s.total for s in from_books) == len(made) - 230
        assert await db[Collections.EVENT_BOOKS].count_documents({"webhook_id": webhook_id}) == 3

    async def test_one_status_counts_skip_the_cut_pages_without_it(self, db: Database) -> None:
        """``counts_from(..., only=PENDING)`` counts what the full count does for that status,
        and does not read a page the bound cuts when its summary counts none pending."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow().replace(second=0, microsecond=0) - timedelta(hours=3)
        made = [
            create_event(
                webhook_id=webhook_id, created_at=start + timedelta(seconds=30 * i),
                forward_url="http://127.0.0.1:9/h" if i % 7 == 0 and i >= PAGE_SIZE else None,
            )
            for i in range(PAGE_SIZE * 3)
        ]  # page 0: none pending; pages 1, 2: every 7th pending  # fmt: skip
        await events.upsert_many(made)
        summaries = await events.summaries(webhook_id=webhook_id)
        read: list[int] = []
        page_counts = events._page_counts

        async def counted(summary: PageSummary, *bounds: datetime | None) -> dict[EventStatus, int]:
            read.append(summary.page)
            return await page_counts(summary, *bounds)

        for cut_at in (made[50].created_at, made[150].created_at):  # cuts page 0, then page 1
            since = cut_at.replace(second=0)
            full = await events.counts_from(summaries, since)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(events, "_page_counts", counted)
                read.clear()
                only = await events.counts_from(summaries, since, only=EventStatus.PENDING)
            assert only[EventStatus.PENDING] == full[EventStatus.PENDING]
            expected = sum(1 for e in made if e.created_at >= since and e.forward_url)
            assert only[EventStatus.PENDING] == expected
            assert read == ([] if cut_at == made[50].created_at else [1])

    async def test_whole_minute_bounds_count_from_the_minutes(self, db: Database) -> None:
        """A page a bound cuts is counted from its per-minute counts when the bound falls on a
        whole minute (its heads are not read), and from its heads otherwise: the same counts."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow().replace(second=0, microsecond=0) - timedelta(hours=3)
        made = [
            create_event(
                webhook_id=webhook_id, created_at=start + timedelta(seconds=25 * i),
                forward_url="http://127.0.0.1:9/h",
            )
            for i in range(PAGE_SIZE * 3)
        ]  # fmt: skip
        await events.upsert_many(made)
        await events.apply_attempts([create_attempt(e, status_code=500) for e in made[::4]])

        def expected(since: datetime, until: datetime) -> dict[EventStatus, int]:
            inside = [i for i, e in enumerate(made) if since <= e.created_at < until]
            failed = sum(i % 4 == 0 for i in inside)
            return {
                EventStatus.PENDING: len(inside) - failed, EventStatus.SUCCESS: 0,
                EventStatus.FAILED: failed,
            }  # fmt: skip

        since, until = start + timedelta(minutes=17), start + timedelta(minutes=101)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(EventRepository, "_page_statuses", None)  # reading heads would fail
            assert await events.counts(webhook_id, since=since) == expected(since, utcnow())
            assert await events.counts(webhook_id, since=since, until=until) == expected(
                since, until
            )
        odd_since, odd_until = since + timedelta(seconds=13), until - timedelta(seconds=7)
        assert await events.counts(webhook_id, since=odd_since, until=odd_until) == expected(
            odd_since, odd_until
        )

    async def test_the_owners_newest_events(self, db: Database) -> None:
        """Kept per webhook by the writes; after some are deleted, or for events written before
        they were kept, read from the pages: the ten newest across the owner's webhooks."""
        events = EventRepository(db)
        username = unique_name("u")
        start = utcnow() - timedelta(hours=1)
        hooks = [new_id(IdPrefix.WEBHOOK) for _ in range(3)]
        made = [
            create_event(
                username=username, webhook_id=hooks[i % 3],
                created_at=start + timedelta(seconds=i * (1 if i < 90 else 37)),
            )
            for i in range(PAGE_SIZE + 40)
        ]  # fmt: skip
        for chunk in (made[:60], made[60:110], made[110:]):
            await events.upsert_many(chunk)

        async def newest() -> list[str]:
            summaries = await events.summaries(username=username)
            return [r.id for r in await events.recent_heads(username, summaries)]

        def expected(alive: list[Event]) -> list[str]:
            return [e.id for e in sorted(alive, key=lambda e: (e.created_at, e.id))][::-1][:10]

        assert await newest() == expected(made)
        await db[Collections.EVENT_COUNTERS].update_many({}, {"$unset": {"recent": ""}})
        assert await newest() == expected(made)  # from the pages
        await events.upsert_many(made[-3:])  # consumed again: kept again
        top = await events.top_page(hooks[2])
        assert top is not None
        await events.delete_page(ExpiredPage(hooks[2], top[1], 0, None))
        alive = [e for e in made if e.id in {h.id for h in await _all_heads(events, hooks)}]
        assert len(alive) < len(made)
        assert await newest() == expected(alive)

    async def test_the_newest_books_hold_the_window(self, db: Database) -> None:
        """The overview reads each webhook's books from the newest down to the one its window
        begins in: the counts over them are those over all pages, with fewer books read."""
        events = EventRepository(db)
        username = unique_name("u")
        start = utcnow() - timedelta(days=3)
        hooks = [new_id(IdPrefix.WEBHOOK) for _ in range(2)]
        made = [
            create_event(
                username=username, webhook_id=hooks[0],
                created_at=start + timedelta(minutes=10 * i),
            )
            for i in range(PAGE_SIZE * 4 + 20)
        ] + [
            create_event(username=username, webhook_id=hooks[1], created_at=start)
        ]  # fmt: skip
        since = utcnow().replace(second=0, microsecond=0) - timedelta(days=1)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("hookbay_common.db.events.books.BOOK_PAGES", 2)
            await events.upsert_many(made)
            newest = await events.newest_summaries(username, since)
            everything = await events.summaries(username=username)
        for hook in hooks:
            mine = [s for s in newest if s.webhook_id == hook]
            assert await events.counts_from(mine, since) == await events.counts_from(
                [s for s in everything if s.webhook_id == hook], since
            )
            assert max(s.last_at for s in mine) == max(
                s.last_at for s in everything if s.webhook_id == hook
            )
        # hook 0: pages 0-4 over 3 days, books of 2 pages; the last day begins on page 2 (book 1)
        assert sorted(s.page for s in newest if s.webhook_id == hooks[0]) == [2, 3, 4]
        assert [s.page for s in newest if s.webhook_id == hooks[1]] == [0]  # its only page

    async def test_pages_without_minutes_are_counted_from_heads(self, db: Database) -> None:
        """A summary written before the per-minute counts existed (layout 2) still counts."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow().replace(second=0, microsecond=0) - timedelta(hours=1)
        made = [
            create_event(webhook_id=webhook_id, created_at=start + timedelta(seconds=10 * i))
            for i in range(PAGE_SIZE)
        ]
        await events.upsert_many(made)
        await db[Collections.EVENT_PAGES].update_many({}, {"$unset": {"minutes": ""}})
        since = start + timedelta(minutes=5)
        counts = await events.counts(webhook_id, since=since)
        assert sum(counts.values()) == sum(e.created_at >= since for e in made)


class TestTalliedSummaries:
    """The recorder adds each batch's changes to the stored page summaries instead of reading
    the pages' heads again; what it adds must always equal a recount from the heads."""

    async def _stored(self, db: Database, webhook_id: str) -> tuple[list[Any], list[Any]]:
        pages = [
            doc
            async for doc in db[Collections.EVENT_PAGES].find({"webhook_id": webhook_id})
        ]  # fmt: skip
        books = [doc async for doc in db[Collections.EVENT_BOOKS].find({"webhook_id": webhook_id})]
        return sorted(pages, key=lambda d: d["page"]), sorted(books, key=lambda d: d["_id"])

    async def _agrees_with_a_recount(
        self, db: Database, events: EventRepository, webhook_id: str
    ) -> list[Any]:
        tallied = await self._stored(db, webhook_id)
        await events.recount((webhook_id, doc["page"]) for doc in tallied[0])
        assert await self._stored(db, webhook_id) == tallied
        return tallied[0]

    async def test_the_pipelines_batches_add_up_to_a_recount(self, db: Database) -> None:
        """Batches as the pipeline makes them — events in one, their attempts in the next —
        with retries, a rejected event, an attempt before its event, an event with its attempt,
        batches written twice, over page boundaries and minutes."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow().replace(second=0, microsecond=0) - timedelta(hours=2)
        made = [
            create_event(
                webhook_id=webhook_id, created_at=start + timedelta(seconds=7 * i),
                forward_url="http://127.0.0.1:9/h",
                rejected_reason=RejectedReason.INVALID_SIGNATURE if i % 37 == 5 else None,
            )
            for i in range(PAGE_SIZE * 2 + 40)
        ]  # fmt: skip
        batches = [made[i : i + 13] for i in range(0, len(made), 13)]
        previous: list[Any] = []
        for number, batch in enumerate(batches):
            tried = [
                create_attempt(
                    e, status_code=(200, 500, 503)[i % 3], will_retry=i % 3 == 2,
                    started_at=e.created_at + timedelta(seconds=1),
                )
                for i, e in enumerate(previous) if e.rejected_reason is None
            ]  # fmt: skip
            if number % 4 == 3:  # a retry of an older event succeeds
                older = batches[number - 3][0]
                tried.append(create_attempt(older, number=2, status_code=200))
            if number % 5 == 1:  # an event whose attempt comes in its own batch
                tried.append(create_attempt(batch[-1], status_code=200))
            if number + 1 < len(batches) and number % 6 == 2:  # an attempt before its event
                tried.append(create_attempt(batches[number + 1][0], status_code=500))
            await record_batch(events, attempts, batch, tried)
            if number % 7 == 4:  # consumed again after a crash
                await record_batch(events, attempts, batch, tried)
            previous = batch
        pages = await self._agrees_with_a_recount(db, events, webhook_id)
        assert [d["page"] for d in pages] == [0, 1, 2]
        assert sum(d["total"] for d in pages) == len(made)
        assert sum(d["rejected"] for d in pages) == sum(e.rejected_reason is not None for e in made)
        assert sum(d["success"] for d in pages) > 0
        assert sum(d["failed"] for d in pages) > 0

    async def test_a_status_update_that_changes_nothing_recounts(self, db: Database) -> None:
        """An attempt written again finds its event already past it (a batch consumed again
        after a crash between the status update and the summary): the page is recounted."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        made = [create_event(webhook_id=webhook_id) for _ in range(10)]
        await events.upsert_many(made)
        tried = [create_attempt(e, status_code=200) for e in made[:4]]
        await events.apply_attempts(tried)
        # the crash: statuses written, the summary not
        await db[Collections.EVENT_PAGES].update_one(
            {"webhook_id": webhook_id}, {"$set": {"success": 0, "pending": 10}}
        )
        await events.apply_attempts(tried)
        (page,) = await self._agrees_with_a_recount(db, events, webhook_id)
        assert (page["success"], page["pending"]) == (4, 6)

    async def test_a_completed_page_is_recounted(self, db: Database) -> None:
        """A summary that drifted (two recorders at once during a partition hand-over, on a
        store whose updates are not atomic) is recounted once its page is complete: when the
        next page reaches the webhook's own position (``_heal_at``)."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        heal_at = _heal_at(webhook_id)
        made = [create_event(webhook_id=webhook_id) for _ in range(PAGE_SIZE * 2)]
        await events.upsert_many(made[:50])
        await db[Collections.EVENT_PAGES].update_one(
            {"webhook_id": webhook_id}, {"$inc": {"pending": -3, "total": -3}}
        )
        await events.upsert_many(made[50 : PAGE_SIZE + heal_at])  # page 0 full, not healed yet
        drifted, _ = await self._stored(db, webhook_id)
        assert drifted[0]["total"] == PAGE_SIZE - 3
        await events.upsert_many(made[PAGE_SIZE + heal_at : PAGE_SIZE + heal_at + 1])
        pages = await self._agrees_with_a_recount(db, events, webhook_id)
        assert [(d["page"], d["total"]) for d in pages] == [(0, PAGE_SIZE), (1, heal_at + 1)]

    async def test_a_summary_it_wrote_is_not_read_again(self, db: Database) -> None:
        """The recorder adds a batch's tally to the newest page summary it wrote without reading
        it back: one write, not a read and a write. A status change on an older page (read, as
        the recorder keeps only each webhook's newest) does not make it forget the newest."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        made = [create_event(webhook_id=webhook_id) for _ in range(PAGE_SIZE + 20)]
        await events.upsert_many(made[: PAGE_SIZE + 10])
        reads = _CountedReads(events._pages)
        events._pages = cast(Any, reads)
        await events.upsert_many(made[PAGE_SIZE + 10 :])
        await events.apply_attempts([create_attempt(e, status_code=200) for e in made[-3:]])
        assert reads.read == []
        await events.apply_attempts([create_attempt(made[0], status_code=200)])
        await events.upsert_many([create_event(webhook_id=webhook_id)])
        assert reads.read == [page_id(webhook_id, 0)]
        assert list(events._summaries) == [webhook_id]  # one summary a webhook: its newest
        pages = await self._agrees_with_a_recount(db, events, webhook_id)
        assert [(d["page"], d["total"], d["success"]) for d in pages] == [
            (0, PAGE_SIZE, 1),
            (1, 21, 3),
        ]

    async def test_a_summary_changed_by_another_writer_is_read_again(self, db: Database) -> None:
        """A page summary another recorder changed since this one wrote it (partitions handed
        over and back, retention's recount) is read again before this one adds to it, so
        neither writer's counts are lost."""
        first, second = EventRepository(db), EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        made = [create_event(webhook_id=webhook_id) for _ in range(10)]
        await first.upsert_many(made)
        await second.apply_attempts([create_attempt(e, status_code=200) for e in made[:4]])
        await first.apply_attempts([create_attempt(e, status_code=400) for e in made[4:7]])
        (page,) = await self._agrees_with_a_recount(db, first, webhook_id)
        assert (page["success"], page["failed"], page["pending"]) == (4, 3, 3)


class _CountedReads:
    """A collection that notes the ``_id`` each ``find_one`` asks for and passes everything on
    to the real one."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.read: list[Any] = []

    async def find_one(self, query: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        self.read.append(query.get("_id"))
        return await self._collection.find_one(query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)


async def _all_heads(events: EventRepository, hooks: list[str]) -> list[Any]:
    found = []
    for hook in hooks:
        found += (await events.heads_for_webhook(hook, limit=1000)).heads
    return found


class TestLayoutMigration:
    async def test_layout_1_events_upgrade_in_place(self, db: Database) -> None:
        """Events stored as one document each (before pages) become heads, bodies and pages,
        below the events recorded since; their attempts learn their pages; a second run
        finds nothing to do."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        await db[Collections.MIGRATIONS].delete_many({})  # a database never upgraded before
        webhook_id = new_id(IdPrefix.WEBHOOK)
        start = utcnow() - timedelta(days=2)
        old = [
            create_event(
                webhook_id=webhook_id, created_at=start + timedelta(seconds=i),
                body=bytes([i % 256]) * 3, forward_url="http://127.0.0.1:9/h",
            )
            for i in range(130)
        ]  # fmt: skip
        old_attempts = [create_attempt(e, status_code=500) for e in old[:5]]
        await db[Collections.EVENTS].insert_many([event_to_document(e) for e in old])
        await db[Collections.ATTEMPTS].insert_many([attempt_to_document(a) for a in old_attempts])
        new = create_event(webhook_id=webhook_id, forward_url=None)
        await events.upsert_many([new])  # recorded by the upgraded recorder before the migration

        assert await migrate_event_layout(db) == len(old)
        assert await migrate_event_layout(db) == 0

        listed = await events.heads_for_webhook(webhook_id, limit=500)
        assert [h.id for h in listed.heads] == [new.id] + [e.id for e in reversed(old)]
        assert await events.get(old[7].id) == old[7]
        assert (
            await db[Collections.EVENTS].count_documents({"request_body": {"$exists": True}}) == 0
        )
        counts = await events.counts(webhook_id)
        assert counts[EventStatus.PENDING] == len(old)
        expired = [
            p async for p in events.expired_pages(old[0].username, start + timedelta(days=1))
        ]
        for page in expired:
            await attempts.delete_page(page)
            await events.delete_page(page)
        assert await attempts.list_for_event(old[0].id) == []
        assert [h.id for h in (await events.heads_for_webhook(webhook_id)).heads] == [new.id]

    async def test_layout_2_gets_its_books(self, db: Database) -> None:
        """Page summaries written before the books existed are entered in them."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        made = [create_event(webhook_id=webhook_id) for _ in range(PAGE_SIZE + 7)]
        await events.upsert_many(made)
        await db[Collections.EVENT_BOOKS].delete_many({})
        await db[Collections.MIGRATIONS].replace_one(
            {"_id": "event_layout"}, {"version": 2}, upsert=True
        )
        assert await events.counts(webhook_id) == dict.fromkeys(EventStatus, 0)
        assert await migrate_event_layout(db) == 0
        assert await events.counts(webhook_id) == {
            EventStatus.PENDING: PAGE_SIZE + 7, EventStatus.SUCCESS: 0, EventStatus.FAILED: 0,
        }  # fmt: skip

    async def test_layout_3_heads_get_their_change_pages(self, db: Database) -> None:
        """Heads recorded before they carried a change page get their own page: a stream
        resuming from before the upgrade finds them; a later change page is kept."""
        events = EventRepository(db)
        webhook_id = new_id(IdPrefix.WEBHOOK)
        made = [create_event(webhook_id=webhook_id) for _ in range(PAGE_SIZE + 7)]
        await events.upsert_many(made)
        heads = db[Collections.EVENTS]
        await heads.update_many({"webhook_id": webhook_id}, {"$unset": {"change_page": ""}})
        await heads.update_one({"_id": made[0].id}, {"$set": {"change_page": 1}})  # changed since
        await db[Collections.MIGRATIONS].replace_one(
            {"_id": "event_layout"}, {"version": 3}, upsert=True
        )
        assert await events.changed_heads(webhook_id, 0) == []
        assert await migrate_event_layout(db) == 0
        on_0 = [row.id for _, row in await events.changed_heads(webhook_id, 0)]
        on_1 = [row.id for _, row in await events.changed_heads(webhook_id, 1)]
        assert on_0 == [e.id for e in made[1:PAGE_SIZE]]
        assert on_1 == [made[0].id] + [e.id for e in made[PAGE_SIZE:]]
        marker = await db[Collections.MIGRATIONS].find_one({"_id": "event_layout"})
        assert marker is not None
        assert marker["version"] == 4

"""Deliveries in the event store (``hookbay_common.db.events.deliveries`` and
``EventRepository._deliver``) against the real Mongo-wire server: precedence, the event status
they derive, the page summaries they move, and events without deliveries left as they were."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

from hookbay_common.clock import utcnow
from hookbay_common.db import AttemptRepository, Collections, Database, EventRepository
from hookbay_common.db.events import PAGE_SIZE, PendingSummaries, record_batch
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import (
    Delivery,
    DeliveryStatus,
    Event,
    EventStatus,
    TransformTrace,
    event_status_of,
)
from tests.support.factories import create_attempt, create_delivery, create_event

S = DeliveryStatus
PAIRS = [(a, b) for a, b in itertools.product(DeliveryStatus, repeat=2) if a != b]


def _winner(earlier: Delivery, later: Delivery) -> DeliveryStatus:
    """The brief's rule, written out: a finished status stands against an unfinished one
    whatever the times; otherwise the later record."""
    if earlier.status.finished and not later.status.finished:
        return earlier.status
    return later.status


async def _head(db: Database, event_id: str) -> dict[str, Any]:
    doc = await db[Collections.EVENTS].find_one({"_id": event_id})
    assert doc is not None
    return doc


async def _deliveries(events: EventRepository, event_id: str) -> list[Delivery]:
    found = await events.get_with_deliveries(event_id)
    assert found is not None
    return found[1]


async def _write(
    events: EventRepository, attempts: AttemptRepository, deliveries: list[Delivery]
) -> PendingSummaries:
    pending = PendingSummaries()
    await record_batch(events, attempts, [], [], pending, deliveries)
    await events.summarise(pending)
    return pending


class TestPrecedence:
    @pytest.mark.parametrize("reading", ["two batches", "one batch", "one batch with the event"])
    async def test_every_pair_of_statuses_in_both_orders(self, db: Database, reading: str) -> None:
        """For each pair of statuses, the earlier record and the later one, read in time order
        and reversed: the same one stands either way — a finished status over an unfinished
        one, else the later; also when the event is in the records' batch (stored with them)."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        start = utcnow() - timedelta(minutes=5)
        cases = []
        for first, second in PAIRS:
            for reverse in (False, True):
                event = create_event(forward_url=None)
                earlier = create_delivery(event, status=first, at=start)
                later = create_delivery(event, status=second, at=start + timedelta(seconds=1))
                order = [later, earlier] if reverse else [earlier, later]
                cases.append((event, order, _winner(earlier, later)))
        if reading == "one batch with the event":
            records = [d for _, order, _ in cases for d in order]
            await record_batch(
                events, attempts, [event for event, _, _ in cases], [], None, records
            )
        else:
            await events.upsert_many([event for event, _, _ in cases])
        if reading == "two batches":
            await _write(events, attempts, [order[0] for _, order, _ in cases])
            await _write(events, attempts, [order[1] for _, order, _ in cases])
        elif reading == "one batch":
            await _write(events, attempts, [d for _, order, _ in cases for d in order])
        for event, order, winner in cases:
            (stored,) = await _deliveries(events, event.id)
            assert stored.status is winner, (order[0].status, order[1].status)

    async def test_a_late_delivering_never_overwrites_a_finished_status(self, db: Database) -> None:
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None)
        await events.upsert(event)
        now = utcnow()
        await _write(events, attempts, [create_delivery(event, status=S.SUCCESS, at=now)])
        late = [
            create_delivery(event, status=status, at=now + timedelta(minutes=1))
            for status in (S.DELIVERING, S.SCHEDULED, S.HELD)
        ]
        await _write(events, attempts, late)
        (stored,) = await _deliveries(events, event.id)
        assert (stored.status, stored.at) == (S.SUCCESS, now)

    @pytest.mark.parametrize(("first", "second"), PAIRS)
    def test_records_at_the_same_moment_settle_the_same_either_way(
        self, first: DeliveryStatus, second: DeliveryStatus
    ) -> None:
        event = create_event()
        now = utcnow()
        a = create_delivery(event, status=first, at=now)
        b = create_delivery(event, status=second, at=now)
        assert a.supersedes(b) != b.supersedes(a)
        if a.status.finished != b.status.finished:
            assert a.supersedes(b) is a.status.finished

    async def test_a_retry_s_chain_stands_over_the_first_whatever_comes_late(
        self, db: Database
    ) -> None:
        """A delivery retried on its own: the retry's records (a later chain) replace the
        first chain's final status, and a record of the first chain read late changes nothing;
        the event's status follows, and the head keeps the retry's chain."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None, routed=True)
        await events.upsert(event)
        now = utcnow()
        failed = create_delivery(event, status=S.FAILED, at=now)
        await _write(events, attempts, [failed])
        assert (await events.get(event.id)).status is EventStatus.FAILED  # type: ignore[union-attr]
        retry = new_id(IdPrefix.CHAIN)
        scheduled = create_delivery(event, status=S.SCHEDULED, at=now + timedelta(seconds=1),
                                    chain=retry)  # fmt: skip
        late_first = create_delivery(event, status=S.FAILED, at=now + timedelta(seconds=2))
        await _write(events, attempts, [scheduled, late_first])
        (stored,) = await _deliveries(events, event.id)
        assert (stored.status, stored.chain) == (S.SCHEDULED, retry)
        assert (await events.get(event.id)).status is EventStatus.PENDING  # type: ignore[union-attr]
        assert retry in (await _head(db, event.id))["deliveries"]
        succeeded = create_delivery(event, status=S.SUCCESS, at=now + timedelta(seconds=3),
                                    chain=retry)  # fmt: skip
        await _write(events, attempts, [succeeded])
        (stored,) = await _deliveries(events, event.id)
        assert (stored.status, stored.chain) == (S.SUCCESS, retry)
        assert (await events.get(event.id)).status is EventStatus.SUCCESS  # type: ignore[union-attr]

    async def test_a_later_record_moves_the_status_not_the_names(self, db: Database) -> None:
        """The lane of a deleted destination knows only its key: its ``failed`` keeps the
        names the delivery was routed with."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None, routed=True)
        await events.upsert(event)
        now = utcnow()
        routed = create_delivery(event, route="main", destination="billing", at=now,
                                 status=S.SCHEDULED)  # fmt: skip
        gone = routed.model_copy(update={"destination": "dst_01", "status": S.FAILED,
                                         "at": now + timedelta(seconds=1)})  # fmt: skip
        await _write(events, attempts, [routed])
        await _write(events, attempts, [gone])
        (stored,) = await _deliveries(events, event.id)
        assert (stored.route, stored.destination, stored.status) == ("main", "billing", S.FAILED)

    def test_the_first_chain_written_out_or_left_out_is_the_same(self) -> None:
        event = create_event()
        now = utcnow()
        implicit = create_delivery(event, status=S.SCHEDULED, at=now)
        explicit = implicit.model_copy(update={"chain": implicit.first_chain})
        assert implicit.precedence == explicit.precedence
        later = implicit.model_copy(update={"chain": new_id(IdPrefix.CHAIN)})
        assert later.supersedes(implicit.model_copy(update={"status": S.SUCCESS}))

    async def test_a_transformations_trace_is_kept_with_the_delivery(self, db: Database) -> None:
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None)
        await events.upsert(event)
        trace = TransformTrace(name="shape", version=2, logs=("before",))
        failed = create_delivery(event, route="a", status=S.TRANSFORM_FAILED,
                                 reason="runtime: Error: x", transform=trace)  # fmt: skip
        retried = create_delivery(event, route="b", status=S.FAILED,
                                  chain=new_id(IdPrefix.CHAIN), transform=trace)  # fmt: skip
        plain = create_delivery(event, route="c", status=S.SUCCESS)
        await _write(events, attempts, [failed, retried, plain])
        stored = {d.route: d for d in await _deliveries(events, event.id)}
        assert stored["a"] == failed
        assert stored["b"] == retried
        assert stored["c"] == plain
        assert await _status(events, event.id) is EventStatus.FAILED

    async def test_a_batch_read_again_writes_nothing(self, db: Database) -> None:
        """Idempotent: the same records again (a batch consumed again after a crash) leave
        the head and the summaries as they were, without a write."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None)
        await events.upsert(event)
        batch = [
            create_delivery(event, route="a", status=S.SUCCESS),
            create_delivery(event, route="b", status=S.HELD, reason="paused"),
            create_delivery(event, route="c", status=S.FILTERED, reason="/body/type: $eq"),
        ]
        await _write(events, attempts, batch)
        before = await _head(db, event.id)
        again = await _write(events, attempts, list(reversed(batch)))
        assert not again.tallies
        assert not again.exact
        assert await _head(db, event.id) == before
        assert before["status"] == "pending"


class TestEventStatusFromDeliveries:
    @pytest.mark.parametrize(
        ("statuses", "expected"),
        [
            ([S.SUCCESS], EventStatus.SUCCESS),
            ([S.FILTERED], EventStatus.SUCCESS),
            ([S.FILTERED, S.FILTERED, S.FILTERED], EventStatus.SUCCESS),
            ([S.SUCCESS, S.FILTERED, S.DEDUPLICATED], EventStatus.SUCCESS),
            ([S.SUCCESS, S.FAILED], EventStatus.FAILED),
            ([S.FAILED, S.HELD], EventStatus.FAILED),
            ([S.TRANSFORM_FAILED, S.SUCCESS], EventStatus.FAILED),
            ([S.SUCCESS, S.HELD], EventStatus.PENDING),
            ([S.FILTERED, S.SCHEDULED], EventStatus.PENDING),
            ([S.DELIVERING], EventStatus.PENDING),
            ([S.SUCCESS, S.DELIVERING, S.FILTERED], EventStatus.PENDING),
        ],
    )
    async def test_derived(
        self, db: Database, statuses: list[DeliveryStatus], expected: EventStatus
    ) -> None:
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None)
        await events.upsert(event)
        deliveries = [
            create_delivery(event, route=f"r{i}", status=s) for i, s in enumerate(statuses)
        ]
        await _write(events, attempts, deliveries)
        stored = await events.get(event.id)
        assert stored is not None
        assert stored.status is expected is event_status_of(deliveries)

    async def test_no_route_matched_is_success(self) -> None:
        assert event_status_of([]) is EventStatus.SUCCESS

    async def test_attempts_of_a_delivery_move_it(self, db: Database) -> None:
        """A routed attempt (with its delivery id) moves its delivery — a waiting retry to
        ``scheduled``, a 2xx to ``success`` — and the event follows its deliveries."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None)
        await events.upsert(event)
        billing = create_delivery(event, route="billing", status=S.DELIVERING)
        audit = create_delivery(event, route="audit", status=S.SUCCESS)
        await _write(events, attempts, [billing, audit])
        chain = billing.first_chain  # the router's task's
        routed = {"delivery_id": billing.id, "route": "billing", "destination": "billing-api"}
        first = create_attempt(
            event, chain_id=chain, status_code=503, will_retry=True, **routed,
            started_at=billing.at + timedelta(seconds=1),
        )  # fmt: skip
        await record_batch(events, attempts, [], [first])
        stored = {d.route: d for d in await _deliveries(events, event.id)}
        assert {r: d.status for r, d in stored.items()} == {
            "audit": S.SUCCESS,
            "billing": S.SCHEDULED,
        }
        assert stored["billing"].reason == "HTTP 503"
        second = create_attempt(
            event, chain_id=chain, number=2, status_code=200, **routed,
            started_at=billing.at + timedelta(seconds=11),
        )  # fmt: skip
        await record_batch(events, attempts, [], [second, first])
        assert await _status(events, event.id) is EventStatus.SUCCESS
        head = await _head(db, event.id)
        assert "status_key" not in head  # the forward_url path's fields stay untouched
        assert {a.id for a in await attempts.list_for_event(event.id)} == {first.id, second.id}

    async def test_deliveries_before_their_event(self, db: Database) -> None:
        """Delivery records recorded before their event (another partition, another
        recorder): a stub with the derived status, which the event's own write completes and
        keeps; its page counts it."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None)
        await _write(events, attempts, [create_delivery(event, status=S.FAILED, reason="HTTP 400")])
        assert await events.get(event.id) is None
        pending = PendingSummaries()
        await record_batch(events, attempts, [event], [], pending)
        await events.summarise(pending)
        assert await _status(events, event.id) is EventStatus.FAILED
        (summary,) = await events.summaries(webhook_id=event.webhook_id)
        assert summary.counts[EventStatus.FAILED] == 1

    async def test_an_event_stored_with_its_deliveries(self, db: Database) -> None:
        """The event, its router's records and a routed attempt in one batch (the usual case
        under load): the event is stored with its deliveries and the status they give, its page
        counts it once under that status, and the batch read again changes nothing."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None)
        billing = create_delivery(event, route="billing", status=S.DELIVERING)
        audit = create_delivery(event, route="audit", status=S.FILTERED, reason="/body/x: $eq")
        routed = {"delivery_id": billing.id, "route": "billing", "destination": "billing-api"}
        attempt = create_attempt(
            event, chain_id=billing.first_chain, status_code=200, **routed,
            started_at=billing.at + timedelta(seconds=1),
        )  # fmt: skip
        for _ in range(2):  # the second time: consumed again after a crash
            pending = PendingSummaries()
            await record_batch(events, attempts, [event], [attempt], pending, [billing, audit])
            await events.summarise(pending)
            stored = {d.route: d.status for d in await _deliveries(events, event.id)}
            assert stored == {"billing": S.SUCCESS, "audit": S.FILTERED}
            assert await _status(events, event.id) is EventStatus.SUCCESS
            (summary,) = await events.summaries(webhook_id=event.webhook_id)
            assert (summary.total, summary.counts[EventStatus.SUCCESS]) == (1, 1)
        assert [a.id for a in await attempts.list_for_event(event.id)] == [attempt.id]

    async def test_a_forward_url_attempt_leaves_an_event_with_deliveries_alone(
        self, db: Database
    ) -> None:
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event()
        await events.upsert(event)
        await _write(events, attempts, [create_delivery(event, status=S.HELD, reason="paused")])
        await record_batch(events, attempts, [], [create_attempt(event, status_code=200)])
        assert await _status(events, event.id) is EventStatus.PENDING


class TestTwoWriters:
    """Two recorders writing one event's deliveries (a partition hand-over). Only the
    interleaving where the other write lands between this one's read and write is tested:
    writes at the very same moment can still lose one on FerretDB v1, whose updates read and
    write in two steps (``docs/data-model.md``, "Deliveries")."""

    async def test_a_write_between_the_read_and_the_write_is_merged(
        self, db: Database, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Another recorder writes the event's deliveries after this one read them: the
        conditional write misses, and this one reads again and merges."""
        events, other, attempts = EventRepository(db), EventRepository(db), AttemptRepository(db)
        event = create_event(forward_url=None)
        await other.upsert(event)  # not remembered by ``events``: it reads the head
        real = events._events.find_one
        reads = []

        async def read_then_another_writes(*args: Any, **kwargs: Any) -> Any:
            found = await real(*args, **kwargs)
            reads.append(found)
            if len(reads) == 1:
                failed = create_delivery(event, route="audit", status=S.FAILED, reason="HTTP 400")
                await record_batch(other, attempts, [], [], PendingSummaries(), [failed])
            return found

        monkeypatch.setattr(events._events, "find_one", read_then_another_writes)
        billing = create_delivery(event, route="billing", status=S.SUCCESS)
        await record_batch(events, attempts, [], [], PendingSummaries(), [billing])
        assert len(reads) == 2  # read, missed, read again
        stored = await _deliveries(other, event.id)
        assert {d.route: d.status for d in stored} == {"audit": S.FAILED, "billing": S.SUCCESS}
        assert await _status(other, event.id) is EventStatus.FAILED

    async def test_a_head_written_by_another_since_this_one_wrote_it_is_read_and_merged(
        self, db: Database, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A recorder remembers the heads it wrote and writes a delivery without reading; when
        another recorder wrote the head since (its deliveries, or only its status), the
        conditional write misses, and it reads and merges."""
        events, other, attempts = EventRepository(db), EventRepository(db), AttemptRepository(db)
        real = events._events.find_one
        reads: list[Any] = []

        async def counted(*args: Any, **kwargs: Any) -> Any:
            reads.append(args)
            return await real(*args, **kwargs)

        monkeypatch.setattr(events._events, "find_one", counted)
        first, second = create_event(forward_url=None), create_event(forward_url=None)
        await record_batch(events, attempts, [first, second], [])
        audit = create_delivery(first, route="audit", status=S.FAILED, reason="HTTP 400")
        await record_batch(other, attempts, [], [], PendingSummaries(), [audit])
        await other.set_status(second.id, EventStatus.FAILED)
        reads.clear()
        billing = [create_delivery(e, route="billing", status=S.SUCCESS) for e in (first, second)]
        await record_batch(events, attempts, [], [], PendingSummaries(), billing)
        assert len(reads) == 2  # each head remembered, each write missed, each read once
        stored = await _deliveries(other, first.id)
        assert {d.route: d.status for d in stored} == {"audit": S.FAILED, "billing": S.SUCCESS}
        assert await _status(other, first.id) is EventStatus.FAILED
        assert await _status(other, second.id) is EventStatus.SUCCESS
        third = create_delivery(first, route="audit", status=S.FAILED, reason="HTTP 400")
        reads.clear()
        await record_batch(events, attempts, [], [], PendingSummaries(), [third])
        assert reads == []  # the head as it wrote it last: no read


class TestForwardUrlEventsUnchanged:
    async def test_no_deliveries_field_and_attempts_as_before(self, db: Database) -> None:
        events, attempts = EventRepository(db), AttemptRepository(db)
        event = create_event()
        attempt = create_attempt(event, status_code=200)
        await record_batch(events, attempts, [event], [])
        await record_batch(events, attempts, [], [attempt])
        head = await _head(db, event.id)
        assert "deliveries" not in head
        assert head["status"] == "success"
        assert head["status_key"] == attempt.status_key
        stored = await db[Collections.ATTEMPTS].find_one({"_id": attempt.id})
        assert stored is not None
        assert not {"delivery_id", "route", "destination"} & stored.keys()
        assert await _deliveries(events, event.id) == []
        rows = await events.page_heads(event.webhook_id, 0)
        assert [r.status for r in rows] == [EventStatus.SUCCESS]


class TestSummariesFollowDeliveries:
    async def test_tallies_equal_a_recount(self, db: Database) -> None:
        """Status changes driven by deliveries, over batches (some read twice, some before
        their events), keep the page summaries exactly what a recount of the heads gives."""
        events, attempts = EventRepository(db), AttemptRepository(db)
        hook = new_id(IdPrefix.WEBHOOK)
        start = utcnow().replace(second=0, microsecond=0) - timedelta(hours=1)
        made = [
            create_event(webhook_id=hook, forward_url=None, created_at=start + timedelta(seconds=9 * i))
            for i in range(PAGE_SIZE + 30)
        ]  # fmt: skip
        steps = [S.HELD, S.DELIVERING, S.SCHEDULED, S.SUCCESS, S.FAILED, S.FILTERED]
        batches = [made[i : i + 17] for i in range(0, len(made), 17)]
        previous: list[Event] = []
        for number, batch in enumerate(batches):
            records = [
                create_delivery(
                    e, route=f"r{k}", status=steps[(i + k + number) % len(steps)],
                    at=e.created_at + timedelta(seconds=number + k),
                )
                for i, e in enumerate([*previous, *batch[:3]])
                for k in range(2)
            ]  # fmt: skip
            pending = PendingSummaries()
            await record_batch(events, attempts, batch, [], pending, records)
            if number % 3 == 1:  # consumed again after a crash
                await record_batch(events, attempts, batch, [], pending, records)
            await events.summarise(pending)
            previous = batch

        async def stored(collection: str) -> list[dict[str, Any]]:
            found = db[collection].find({"webhook_id": hook}).sort("_id")  # updates reorder rows
            return [d async for d in found]

        pages, books = await stored(Collections.EVENT_PAGES), await stored(Collections.EVENT_BOOKS)
        await events.recount((hook, d["page"]) for d in pages)
        assert await stored(Collections.EVENT_PAGES) == pages
        assert await stored(Collections.EVENT_BOOKS) == books
        heads = [h for page in (0, 1) for h in await events.page_heads(hook, page)]
        by_status = {s: sum(h.status is s for h in heads) for s in EventStatus}
        assert sum(d["total"] for d in pages) == len(made)
        for status in EventStatus:
            assert sum(d[status.value] for d in pages) == by_status[status]
        assert by_status[EventStatus.FAILED] > 0
        assert by_status[EventStatus.PENDING] > 0


async def _status(events: EventRepository, event_id: str) -> EventStatus:
    stored = await events.get(event_id)
    assert stored is not None
    return stored.status

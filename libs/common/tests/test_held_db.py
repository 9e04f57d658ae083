"""The hold store against the real Mongo-wire server (FerretDB locally, MongoDB in production)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookbay_common.clock import utcnow
from hookbay_common.db import Collections, Database, HoldRepository, migrate
from hookbay_common.db.held import HELD_PAGE_SIZE
from tests.support.factories import unique_name


def tasks(count: int, start: int = 0) -> list[bytes]:
    return [f"task-{i}".encode() for i in range(start, start + count)]


async def stored(db: Database, destination: str) -> list[dict[str, Any]]:
    docs = [d async for d in db[Collections.HELD_DELIVERIES].find({"destination": destination})]
    return sorted(docs, key=lambda d: d["seq"])


class TestHoldRepository:
    async def test_reads_back_in_seq_order_across_pages(self, db: Database) -> None:
        repo, dest = HoldRepository(db), unique_name("dst_")
        for i in range(0, 250, 16):  # as a lane holds them: a few at a time
            await repo.append(dest, tasks(min(16, 250 - i), i), held_at=utcnow())
        everything = await repo.read(dest, after=-1, limit=1000)
        assert [h.seq for h in everything] == list(range(250))
        assert [h.task for h in everything] == tasks(250)
        window = await repo.read(dest, after=HELD_PAGE_SIZE - 3, limit=5)
        assert [h.seq for h in window] == [98, 99, 100, 101, 102]

    async def test_a_second_writer_with_a_stale_next_moves_on(self, db: Database) -> None:
        """Two processes holding for one destination (a rebalance overlap, or a crash before
        ``next`` was written): a taken seq collides on the unique index, nothing is lost, and
        seqs stay dense."""
        dest = unique_name("dst_")
        first, second = HoldRepository(db), HoldRepository(db)
        assert await first.append(dest, tasks(5), held_at=utcnow()) == 0
        assert await second.append(dest, tasks(3, 5), held_at=utcnow()) == 5
        assert await first.append(dest, tasks(2, 8), held_at=utcnow()) == 8  # first's next: 5
        docs = await stored(db, dest)
        assert [d["seq"] for d in docs] == list(range(10))
        assert sorted(bytes(d["task"]) for d in docs) == sorted(tasks(10))

    async def test_advance_forgets_whole_pages_and_an_emptied_lane(self, db: Database) -> None:
        repo, dest = HoldRepository(db), unique_name("dst_")
        await repo.append(dest, tasks(16), held_at=utcnow())
        for i in range(16, 250, 16):
            await repo.append(dest, tasks(min(16, 250 - i), i), held_at=utcnow())
        assert dest in await repo.holding()
        await repo.advance(dest, 150)
        docs = await stored(db, dest)
        assert docs[0]["seq"] == 100  # page 0 gone; page 1 waits until it is done
        assert [h.seq for h in await repo.read(dest, after=149, limit=2)] == [150, 151]
        state = await repo.state(dest)
        assert (state.head, state.count) == (150, 100)
        assert state.oldest_held_at is not None
        await repo.advance(dest, 250)
        assert await stored(db, dest) == []
        assert dest not in await repo.holding()
        assert (await repo.state(dest)).count == 0

    async def test_an_advance_never_goes_back(self, db: Database) -> None:
        repo, dest = HoldRepository(db), unique_name("dst_")
        await repo.append(dest, tasks(10), held_at=utcnow())
        await repo.advance(dest, 6)
        await repo.advance(dest, 3)
        assert (await repo.state(dest)).head == 6
        assert [h.seq for h in await repo.read(dest, after=5, limit=10)] == [6, 7, 8, 9]

    async def test_holding_again_after_a_drain_continues_the_seq(self, db: Database) -> None:
        repo, dest = HoldRepository(db), unique_name("dst_")
        await repo.append(dest, tasks(3), held_at=utcnow())
        await repo.advance(dest, 3)
        assert await HoldRepository(db).append(dest, tasks(2, 3), held_at=utcnow()) == 3
        assert dest in await repo.holding()
        assert [h.seq for h in await repo.read(dest, after=2, limit=10)] == [3, 4]

    async def test_migrate_makes_the_unique_seq_index_idempotently(self, db: Database) -> None:
        await migrate(db)
        indexes = {
            info["name"]: info
            async for info in await db[Collections.HELD_DELIVERIES].list_indexes()
        }
        assert indexes["destination_seq"].get("unique") is True
        assert "destination_page" in indexes

    async def test_drop_forgets_a_destination(self, db: Database) -> None:
        repo, dest = HoldRepository(db), unique_name("dst_")
        await repo.append(dest, tasks(120), held_at=utcnow())
        await repo.drop(dest)
        assert await stored(db, dest) == []
        assert dest not in await repo.holding()
        assert await repo.append(dest, tasks(1), held_at=utcnow()) == 0


class TestExpiry:
    """Retention of held tasks: those held before a cut-off go, in time order, from the head."""

    async def test_tasks_held_before_the_cut_off_go_and_the_drain_skips_them(
        self, db: Database
    ) -> None:
        repo, dest = HoldRepository(db), unique_name("dst_")
        old, new = utcnow() - timedelta(days=10), utcnow()
        for i in range(0, 130, 16):
            await repo.append(dest, tasks(min(16, 130 - i), i), held_at=old)
        await repo.append(dest, tasks(5, 130), held_at=new)
        cut = new - timedelta(days=1)
        assert await repo.expire(dest, cut, dry=True) == 130
        assert len(await stored(db, dest)) == 135  # a dry run deletes nothing
        assert await repo.expire(dest, cut) == 130
        assert [d["seq"] for d in await stored(db, dest)] == list(range(130, 135))
        assert [h.seq for h in await repo.read(dest, after=-1, limit=10)] == list(range(130, 135))
        state = await repo.state(dest)
        assert (state.head, state.count, state.oldest_held_at) == (0, 135, new.replace(
            microsecond=new.microsecond // 1000 * 1000))  # fmt: skip
        assert await repo.expire(dest, cut) == 0
        await repo.advance(dest, 135)  # the drain delivered the rest: the lane is empty
        assert dest not in await repo.holding()

    async def test_a_lane_whose_every_task_expired_is_empty(self, db: Database) -> None:
        repo, dest = HoldRepository(db), unique_name("dst_")
        await repo.append(dest, tasks(3), held_at=utcnow() - timedelta(days=40))
        await repo.advance(dest, 1)  # one delivered before its destination was paused
        assert await repo.expire(dest, utcnow() - timedelta(days=30)) == 2
        state = await repo.state(dest)
        assert (state.head, state.count, state.oldest_held_at) == (3, 0, None)
        assert dest not in await repo.holding()
        assert await HoldRepository(db).append(dest, tasks(1, 3), held_at=utcnow()) == 3

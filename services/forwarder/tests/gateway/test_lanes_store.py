"""The lanes on the real hold store (FerretDB locally): held tasks outlive the process that held
them, a new instance drains them in seq order, and a drain cut short is taken up again with at
most the not-yet-recorded part delivered twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from pymongo import AsyncMongoClient

from hookbay_common.db import Collections, Database, HoldRepository, HoldStoreError
from hookbay_common.db import client as db_client
from hookbay_common.routing.tasks import DestinationTask
from hookbay_common.settings import Settings
from hookbay_forwarder.gateway import Delivered, DestinationState, LaneConfig, Lanes
from tests.support.factories import create_destination_task, unique_name
from tests.support.waiting import until

P = ("deliveries", 0)


@asynccontextmanager
async def instance(
    settings: Settings,
    deliver: Callable[[DestinationTask], Awaitable[Delivered]],
    configs: dict[str, LaneConfig],
    *,
    grace: float = 5.0,
    repository: type[HoldRepository] = HoldRepository,
) -> AsyncIterator[tuple[Lanes, HoldRepository]]:
    """One forwarder process's lanes: its own client, repository and lanes."""
    mongo: AsyncMongoClient[dict[str, Any]] = db_client.connect(settings.mongo_url)
    repo = repository(db_client.database(mongo))
    lanes = Lanes(deliver, configs.get, repo, drain_window=8)
    try:
        yield lanes, repo
    finally:
        await lanes.close(grace)
        await mongo.close()


class ProgressLost(HoldRepository):
    """A store that never records a drain's progress: what a crash right after each delivery,
    before the writer got to it, leaves behind."""

    async def advance(self, destination: str, head: int) -> None:
        raise HoldStoreError("progress not written (test)")


class Recorder:
    def __init__(self, *, stop_after: int | None = None) -> None:
        self.delivered: list[str] = []
        self.stop_after = stop_after
        self.blocked = asyncio.Event()

    async def deliver(self, task: DestinationTask) -> Delivered:
        if self.stop_after is not None and len(self.delivered) >= self.stop_after:
            self.blocked.set()
            await asyncio.Event().wait()  # hangs: the process is killed with this running
        self.delivered.append(task.delivery_id)
        return Delivered("success")


async def held_docs(db: Database, destination: str) -> int:
    return len(
        [d async for d in db[Collections.HELD_DELIVERIES].find({"destination": destination})]
    )


async def hold(settings: Settings, destination: str, count: int) -> list[str]:
    """A process holds ``count`` tasks of a paused destination, commits, and exits."""
    ids = []
    configs = {destination: LaneConfig(state=DestinationState.PAUSED)}
    async with instance(settings, Recorder().deliver, configs) as (lanes, _):
        for offset in range(count):
            task = create_destination_task(destination=destination)
            lanes.submit(P, offset, [task])
            ids.append(task.delivery_id)
        await until(lambda: lanes.committable(P) == count, what="every task held")
    return ids


class TestHeldAcrossRestarts:
    async def test_a_new_instance_drains_them_in_order(
        self, settings: Settings, db: Database
    ) -> None:
        dest = unique_name("dst_")
        ids = await hold(settings, dest, 130)
        assert await held_docs(db, dest) == 130
        recorder = Recorder()
        configs = {dest: LaneConfig(max_concurrency=1)}
        async with instance(settings, recorder.deliver, configs) as (lanes, repo):
            await lanes.adopt(lambda d: d == dest)
            await until(lambda: len(recorder.delivered) == 130, what="every held task delivered")
            assert recorder.delivered == ids
            await until(lambda: lanes.snapshot(dest) is None, what="the lane live and idle")
            assert dest not in await repo.holding()
        assert await held_docs(db, dest) == 0

    async def test_a_drain_cut_short_resumes_without_skipping(
        self, settings: Settings, db: Database
    ) -> None:
        dest = unique_name("dst_")
        ids = await hold(settings, dest, 60)
        configs = {dest: LaneConfig(max_concurrency=1)}
        first = Recorder(stop_after=25)
        async with instance(settings, first.deliver, configs, grace=0) as (lanes, _):
            await lanes.adopt(lambda d: d == dest)
            await until(first.blocked.is_set, what="the first instance stuck mid-drain")
        assert first.delivered == ids[:25]
        second = Recorder()
        async with instance(settings, second.deliver, configs) as (lanes, repo):
            await lanes.adopt(lambda d: d == dest)
            await until(lambda: second.delivered[-1:] == ids[-1:], what="the drain finished")
            await until(lambda: lanes.snapshot(dest) is None, what="the lane live and idle")
            assert dest not in await repo.holding()
        resumed_at = ids.index(second.delivered[0])
        assert resumed_at <= 25  # never after where the first stopped: nothing skipped
        assert second.delivered == ids[resumed_at:]  # in order; repeats only before 25
        assert await held_docs(db, dest) == 0

    async def test_new_tasks_wait_behind_held_ones_after_a_restart(
        self, settings: Settings, db: Database
    ) -> None:
        dest = unique_name("dst_")
        held = await hold(settings, dest, 20)
        recorder = Recorder()
        configs = {dest: LaneConfig(max_concurrency=4)}
        async with instance(settings, recorder.deliver, configs) as (lanes, _):
            await lanes.adopt(lambda d: d == dest)
            newer = [create_destination_task(destination=dest) for _ in range(10)]
            for offset, task in enumerate(newer):
                lanes.submit(P, offset, [task])
            await until(lambda: len(recorder.delivered) == 30, what="all delivered")
            assert recorder.delivered[:20] == held  # started in order; 4 at a time may
            assert sorted(recorder.delivered[20:]) == sorted(t.delivery_id for t in newer)
            await until(lambda: lanes.committable(P) == 10, what="offsets committable")
        assert await held_docs(db, dest) == 0

    async def test_a_drain_whose_progress_was_lost_delivers_again_in_order(
        self, settings: Settings, db: Database
    ) -> None:
        """Draining the same held tasks twice is harmless: at-least-once, in order, and the
        store ends empty."""
        dest = unique_name("dst_")
        ids = await hold(settings, dest, 30)
        configs = {dest: LaneConfig(max_concurrency=1)}
        first = Recorder(stop_after=20)
        async with instance(settings, first.deliver, configs, grace=0, repository=ProgressLost) as (
            lanes,
            _,
        ):
            await lanes.adopt(lambda d: d == dest)
            await until(first.blocked.is_set, what="the first instance stuck mid-drain")
        assert first.delivered == ids[:20]
        second = Recorder()
        async with instance(settings, second.deliver, configs) as (lanes, repo):
            await lanes.adopt(lambda d: d == dest)
            await until(lambda: len(second.delivered) == 30, what="the drain finished")
            await until(lambda: lanes.snapshot(dest) is None, what="the lane live and idle")
            assert dest not in await repo.holding()
        assert second.delivered == ids  # the first 20 twice in all, every one in order
        assert await held_docs(db, dest) == 0

"""The whole intake recovers from broker restarts by itself, under load.

Ingest, forwarder and recorder run as real processes against a private Kafka broker (and, in one
scenario, a private FerretDB); a second process sends signed requests at ``RATE``/s round-robin
to ``OWNERS`` webhooks (``tests/support/load.py``). The broker is then stopped and started (its
data kept), killed with SIGKILL, or kept away longer than the produce timeout. For each scenario:
every request answered 200 is stored and delivered byte-exact, ingest answers 200 again within
``RECOVERY_LIMIT`` seconds of the broker's return, readiness fails while the broker is away and
comes back, no hookbay process is restarted (or restarts itself), the forwarder and the recorder
catch up on their own, and no answer other than 200 or the documented 503 (with Retry-After) is
given. The measured times are printed (``-s``) as ``recovery:`` lines and kept in the test's
``tmp_path`` as ``figures.json`` (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from hookbay_common.db import EventRepository, UserRepository, WebhookRepository
from hookbay_common.db import client as db_client
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from tests.support.broker import ROOT, PrivateBroker, PrivateFerretDB
from tests.support.factories import TEST_SECRET_KEY, create_user, create_webhook, unique_name
from tests.support.load import Lines
from tests.support.processes import ServiceProcess, service_process
from tests.support.receiver import Receiver
from tests.support.settings import settings_of
from tests.support.waiting import until

RATE = 50.0
OWNERS = 20
RECOVERY_LIMIT = 20.0
"""Broker back (answering) → a request sent then answered 200: "within a few seconds"; measured
1-5 s (docs/reliability.md), with room for a machine busy with other tests."""
CATCH_UP_LIMIT = 90.0
AFTER = 150
"""Accepted requests after the last recovery before the load stops (sustained, not a fluke)."""


@dataclass
class Target:
    path: str
    secret: str
    url: str
    webhook_id: str


@dataclass
class Intake:
    broker: PrivateBroker
    ingest: ServiceProcess
    forwarder: ServiceProcess
    recorder: ServiceProcess
    targets: list[Target]
    events: EventRepository
    answers: Lines
    """Every answer the load client wrote down so far (read incrementally)."""
    receiver: Receiver
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def processes(self) -> tuple[ServiceProcess, ...]:
        return self.ingest, self.forwarder, self.recorder


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[PrivateBroker]:
    broker = PrivateBroker(tmp_path / "kafka")
    await broker.up()
    yield broker
    await broker.down()


@contextlib.asynccontextmanager
async def intake(
    broker: PrivateBroker, env: dict[str, str], mongo_url: str, receiver: Receiver, tmp: Path,
    **overrides: str,
) -> AsyncIterator[Intake]:  # fmt: skip
    """The three processes on ``broker`` and ``mongo_url`` (a fresh topic namespace and
    ``OWNERS`` owners on the pro plan, each with a signed webhook forwarding to ``receiver``),
    and the load client sending to them; stopped (load first) on exit."""
    penv = {
        **env, "HOOKBAY_KAFKA_BOOTSTRAP": broker.bootstrap, "HOOKBAY_MONGO_URL": mongo_url,
        "HOOKBAY_KAFKA_NAMESPACE": f"rec.{unique_name('n')}", "HOOKBAY_KAFKA_PARTITIONS": "6",
        "HOOKBAY_KAFKA_SESSION_TIMEOUT_MS": "10000", "HOOKBAY_SHUTDOWN_GRACE": "2",
        "HOOKBAY_VIEW_REFRESH_INTERVAL": "0.5", **overrides,
    }  # fmt: skip
    settings = settings_of(penv, Settings)
    await ensure_configured_topics(settings)
    mongo = db_client.connect(mongo_url)
    db = db_client.database(mongo)
    await db_client.migrate(db)
    targets = await _owners(db, receiver)
    (tmp / "targets.json").write_text(
        json.dumps([{"path": t.path, "secret": t.secret} for t in targets])
    )
    answers_path = tmp / "answers.jsonl"
    async with (
        service_process("recorder", penv, tmp / "recorder.log") as recorder,
        service_process("forwarder", penv, tmp / "forwarder.log") as forwarder,
        service_process("ingest", penv, tmp / "ingest.log") as ingest,
    ):
        load = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.load", str(tmp / "targets.json"),
            str(answers_path), "--base", ingest.base, "--rate", str(RATE), cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        it = Intake(
            broker, ingest, forwarder, recorder, targets, EventRepository(db), Lines(answers_path),
            receiver,
        )  # fmt: skip
        try:
            await until(lambda: _accepted_since(it, 0) >= 100, 60, interval=0.2,
                        what="load accepted before the outage")  # fmt: skip
            yield it
        finally:
            if load.returncode is None:
                load.terminate()
            async with asyncio.timeout(120):
                await load.wait()
            await mongo.close()


async def _owners(db: db_client.Database, receiver: Receiver) -> list[Target]:
    users = UserRepository(db)
    webhooks = WebhookRepository(db, SecretBox(TEST_SECRET_KEY))
    targets = []
    for _ in range(OWNERS):
        user = await users.create(create_user(plan="pro"))
        secret = unique_name("s") * 2
        url = receiver.url()
        hook = await webhooks.create(
            create_webhook(username=user.username, secret=SecretStr(secret), forward_url=url)
        )
        targets.append(Target(f"/w/{user.username}/{hook.name}", secret, url, hook.id))
    return targets


def _accepted_since(it: Intake, since: float) -> int:
    return sum(1 for a in it.answers() if a["status"] == 200 and a["sent"] >= since)


def _sustained(it: Intake, since: float) -> bool:
    """``AFTER`` requests sent since ``since`` were answered 200: intake is back for good."""
    return _accepted_since(it, since) >= AFTER


async def outage(
    it: Intake, stop: Callable[[], Awaitable[None]], start: Callable[[], Awaitable[None]],
    *, hold: float, label: str,
) -> float:  # fmt: skip
    """``stop``, check that the intake says so (503s, ingest and forwarder not ready), keep it
    away at least ``hold`` seconds, ``start``; return when ingest accepted again (the time the
    broker was back)."""
    down_at = time.time()
    await stop()
    await until(
        lambda: any(a["status"] == 503 and a["sent"] >= down_at for a in it.answers()), 30,
        interval=0.1, what="503 while the broker is away",
    )  # fmt: skip
    for process in (it.ingest, it.forwarder):
        await until(partial(process.answers, "/readyz", 503), 30, interval=0.2,
                    what=f"{process.role} not ready while the broker is away")  # fmt: skip
    await asyncio.sleep(max(0.0, down_at + hold - time.time()))  # scenario: stay away this long
    await start()
    back = time.time()
    await until(lambda: _accepted_since(it, back) > 0, RECOVERY_LIMIT, interval=0.05,
                what="ingest answers 200 again")  # fmt: skip
    first = min(a["answered"] for a in it.answers() if a["status"] == 200 and a["sent"] >= back)
    snapshot = [a for a in it.answers() if a["status"] == 200 and a["answered"] <= first]
    await _delivered(it, snapshot, CATCH_UP_LIMIT)
    caught_up = time.time()
    for process in it.processes:
        await process.wait_until_answering("/readyz", 200, timeout=60)
    it.figures[label] = {
        "away_s": round(back - down_at, 1), "first_200_s": round(first - back, 2),
        "forwarder_caught_up_s": round(caught_up - back, 2),
    }  # fmt: skip
    return back


async def _delivered(it: Intake, accepted: list[dict[str, Any]], timeout: float) -> None:
    """Until the receiver got every body of ``accepted`` (byte-exact) at its target's URL."""
    receiver_bodies: dict[int, set[bytes]] = {}

    def done() -> bool:
        for target_index, target in enumerate(it.targets):
            receiver_bodies[target_index] = {r.body for r in it.receiver.received(target.url)}
        return all(a["body"].encode() in receiver_bodies[a["target"]] for a in accepted)

    try:
        await until(done, timeout, interval=0.25, what="forwarder delivered every accepted body")
    except AssertionError as exc:
        missing = [a for a in accepted if a["body"].encode() not in receiver_bodies[a["target"]]]
        raise AssertionError(f"{exc}: {len(missing)} of {len(accepted)} missing, first "
                             f"{missing[:3]}; {await _state(it.forwarder)}") from None  # fmt: skip


async def _state(process: ServiceProcess) -> str:
    """What a process says about itself, for a failure message."""
    ready = await process.get("/readyz")
    metrics = (await process.get("/metrics")).text.splitlines()
    wanted = ("hookbay_consumer_seconds_since_commit", "hookbay_producer_", "hookbay_consumer_lag")
    lines = [line for line in metrics if line.startswith(wanted) and " 0.0" not in line]
    return f"{process.role} readyz {ready.json()}; " + "; ".join(lines[:30])


async def finish(it: Intake, last_back: float) -> None:
    """Sustained intake after the last recovery; then every check of the module docstring."""
    await until(partial(_sustained, it, last_back), 60, interval=0.2,
                what="sustained 200s after the recovery")  # fmt: skip
    for process in it.processes:
        assert not process.exited, f"{process.role} exited:\n{process.tail()}"
    answers = it.answers()
    statuses = Counter(a["status"] for a in answers)
    assert set(statuses) <= {200, 503}, statuses
    assert all(a["retry_after"] for a in answers if a["status"] == 503)
    accepted = [a for a in answers if a["status"] == 200]
    await _delivered(it, accepted, CATCH_UP_LIMIT)
    await _recorded(it, accepted)
    for process in it.processes:
        assert not process.exited, f"{process.role} exited:\n{process.tail()}"
        assert await process.answers("/healthz", 200), process.role
        try:
            await process.wait_until_answering("/readyz", 200, timeout=30)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {await _state(process)}") from None
        events = process.log_events()
        assert "handler_crashed" not in events, process.tail()
        assert "consumer_failed" not in events, process.tail()
        assert "Traceback" not in process.log(), process.tail()
    it.figures["answers"] = dict(statuses)
    figures = json.dumps(it.figures)
    (it.answers.path.parent / "figures.json").write_text(figures)
    print(f"recovery: {figures}")  # noqa: T201 - the measured figures (-s)


async def _recorded(it: Intake, accepted: list[dict[str, Any]]) -> None:
    """Until the recorder stored every accepted event (by request id), then check the bodies
    byte-exact. (A count is not enough: events answered 503 may be stored too.)"""
    expected: dict[int, dict[str, bytes]] = {}
    for a in accepted:
        expected.setdefault(a["target"], {})[a["request_id"]] = a["body"].encode()
    stored: dict[int, dict[str, bytes]] = {}

    async def all_stored() -> bool:
        for index, bodies in expected.items():
            webhook_id = it.targets[index].webhook_id
            if await it.events.count_for_webhook(webhook_id) < len(bodies):
                return False
            if not bodies.keys() <= stored.get(index, {}).keys():
                stored[index] = {
                    event.request_id: event.body
                    async for event, _ in it.events.stream_for_webhook(webhook_id)
                }
                if not bodies.keys() <= stored[index].keys():
                    return False
        return True

    try:
        await until(all_stored, CATCH_UP_LIMIT, interval=1.0, what="recorder stored every event")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {await _state(it.recorder)}") from None
    for index, bodies in expected.items():
        assert {rid: stored[index].get(rid) for rid in bodies} == bodies


@pytest.mark.heavy  # a long chain of outages: collected first (conftest.py)
class TestBrokerRecovery:
    async def test_stopped_twice_killed_and_away_longer_than_the_produce_timeout(
        self, broker: PrivateBroker, env: dict[str, str], mongo_url: str,
        receiver: Receiver, tmp_path: Path,
    ) -> None:  # fmt: skip
        """Four outages one after another on one intake, each starting from a stack that
        recovered from the one before: stopped and started twice, killed with SIGKILL, and kept
        away five times the produce timeout (2 s here, so the first three outlast it too)."""
        produce_timeout = 2.0
        outages = (
            (broker.down, 5.0, "stop_start_1"),
            (broker.down, 5.0, "stop_start_2"),
            (broker.kill, 3.0, "kill_9"),
            (broker.down, 5 * produce_timeout, "away_long"),
        )
        async with intake(
            broker, env, mongo_url, receiver, tmp_path,
            HOOKBAY_PRODUCE_TIMEOUT=str(produce_timeout),
        ) as it:  # fmt: skip
            back = 0.0
            for stop, hold, label in outages:
                if back:
                    sustained = partial(_sustained, it, back)
                    await until(sustained, 60, interval=0.2, what=f"sustained 200s before {label}")
                back = await outage(it, stop, broker.up, hold=hold, label=label)
            await finish(it, back)

    async def test_broker_and_ferretdb_restarted_together(
        self, broker: PrivateBroker, env: dict[str, str], receiver: Receiver,
        tmp_path: Path,
    ) -> None:  # fmt: skip
        ferretdb = PrivateFerretDB(tmp_path / "ferretdb")
        await ferretdb.up()
        try:
            mongo_url = f"{ferretdb.url}/{unique_name('hookbay_rec_')}"

            async def stop_both() -> None:
                await asyncio.gather(broker.down(), ferretdb.down())

            async def start_both() -> None:
                await asyncio.gather(broker.up(), ferretdb.up())

            async with intake(broker, env, mongo_url, receiver, tmp_path) as it:
                back = await outage(it, stop_both, start_both, hold=5, label="with_ferretdb")
                await finish(it, back)
        finally:
            await ferretdb.down()

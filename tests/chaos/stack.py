"""The chaos suite's private stack: its own Kafka, FerretDB, PostgreSQL and Redis (own ports, own
data under ``.cache/chaos-run``, never the ``make run`` or ``make test`` servers), and per scenario
a fresh database and topic namespace with every hookbay process — two ingest replicas, forwarder,
recorder, stats processor, dashboard — the destination and the load client as real processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from pydantic import SecretStr
from pymongo.errors import PyMongoError

from hookbay_common.clock import utcnow
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import (
    DestinationRepository,
    EventRepository,
    StatsRepository,
    UserRepository,
    WebhookRepository,
)
from hookbay_common.db import client as db_client
from hookbay_common.db.alert_channels import AlertChannelRepository
from hookbay_common.db.forwarding import keep_forward_route
from hookbay_common.db.transformations import TransformationRepository
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.kafka import create_producer, ensure_configured_topics
from hookbay_common.models import (
    AlertChannel,
    AlertChannelType,
    DestinationState,
    Route,
    StateReason,
    Transformation,
)
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_dev.http import async_client
from hookbay_dev.processes import launch
from tests.support.broker import ROOT, PrivateServer
from tests.support.factories import (
    TEST_SECRET_KEY,
    create_destination,
    create_route,
    create_user,
    create_webhook,
)
from tests.support.kafka import bodies_on_topic
from tests.support.load import Lines
from tests.support.net import free_port
from tests.support.processes import ServiceProcess, service_process
from tests.support.settings import settings_of
from tests.support.waiting import until

RUN_DIR = ROOT / ".cache" / "chaos-run"
# below the ephemeral range (tests/support/net.py): a port in it can be taken by any outgoing
# connection while its server is stopped, and the restart then fails ("Address already in use")
KAFKA_PORT, MONGO_PORT, REDIS_PORT, PG_PORT = 18092, 17017, 18379, 17433
INFRA_ENV = {
    "HOOKBAY_INFRA_KAFKA_PORT": str(KAFKA_PORT), "HOOKBAY_INFRA_MONGO_PORT": str(MONGO_PORT),
    "HOOKBAY_INFRA_REDIS_PORT": str(REDIS_PORT), "HOOKBAY_INFRA_PG_PORT": str(PG_PORT),
}  # fmt: skip
SERVERS = ("postgres", "ferretdb", "kafka", "redis")  # in start order
OWNERS = 20
ROUTED_DESTINATION = "chaos"
"""Every other owner's webhook has no forward URL but one unfiltered route to its destination of
this name (the same URL): both delivery paths under every fault, one delivery per event each.
With a fan-out of N, N routes to N destinations (``chaos``, ``chaos-2``, …, at ``/<owner>``,
``/<owner>/2``, …)."""
ALERT_SECRET = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"
ROLES = ("recorder", "forwarder", "stats", "ingest-1", "ingest-2", "dashboard")
SERVICE_ENV = {
    # retries close together, so a drain after a destination outage takes seconds, not hours
    "HOOKBAY_RETRY_SCHEDULE": "0,2s,5s,10s,20s,30s,60s",
    # a hanging destination times out well within a scenario
    "HOOKBAY_FORWARD_TIMEOUT": "3",
    "HOOKBAY_KAFKA_PARTITIONS": "6",
    "HOOKBAY_ALLOW_PRIVATE_DESTINATIONS": "true",
    "HOOKBAY_SECRET_KEY": TEST_SECRET_KEY,
    "HOOKBAY_STATS_GRACE": "600",
    # an ingest replica told to stop leaves the load client's rotation first (its /readyz)
    "HOOKBAY_DRAIN_DELAY": "3",
}


class Infra:
    """The private servers, each started, stopped and killed through ``deploy/local/infra.sh``."""

    def __init__(self, run_dir: Path = RUN_DIR) -> None:
        self.run_dir = run_dir
        self.servers = {name: PrivateServer(name, run_dir, INFRA_ENV) for name in SERVERS}
        self.kafka = f"127.0.0.1:{KAFKA_PORT}"
        self.mongo = f"mongodb://127.0.0.1:{MONGO_PORT}"
        self.redis = f"redis://127.0.0.1:{REDIS_PORT}/0"

    @classmethod
    def shared(cls, kafka: str, mongo: str, redis: str) -> Infra:
        """Servers someone else runs (``make test``'s): scenarios that stop a server are not
        for these."""
        infra = cls()
        infra.servers = {}
        infra.kafka, infra.mongo, infra.redis = kafka, mongo.rstrip("/"), redis
        return infra

    async def up(self, *names: str) -> None:
        for name in names or SERVERS:
            await self.servers[name].up()

    async def down(self, *names: str) -> None:
        for name in names or tuple(reversed(SERVERS)):
            await self.servers[name].down()

    async def psql(self, sql: str) -> str:
        """A statement on the store's PostgreSQL, as its owner."""
        proc = await asyncio.create_subprocess_exec(
            "runuser", "-u", "hookbay-pg", "--", "psql", "-h", "127.0.0.1", "-p", str(PG_PORT),
            "-U", "hookbay", "-d", "ferretdb", "-tAc", sql,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        async with asyncio.timeout(60):
            output, _ = await proc.communicate()
        assert proc.returncode == 0, output.decode()
        return output.decode().strip()


@dataclass
class Target:
    path: str
    secret: str
    webhook_id: str


SPIN_ROUTE = "spin"
THROWS = "addHandler('transform', () => { throw new Error('not now') });"
"""The spinner's transformation outside its spins: fails at once (and is soon suspended)."""


class Stack:
    """One scenario's hookbay on ``infra``: a fresh database and namespace, ``OWNERS`` pro-plan
    owners each with a signed webhook delivering to the destination (half by ``forward_url``
    stored as before it was a route, on the forwarder's own path; half over ``fan_out`` routes, ``ROUTED_DESTINATION``, created with ``routed_fields``); every
    process started by ``__aenter__`` and stopped (load first) by ``__aexit__``. A fault or a
    scenario's check writes what it measured of the destinations' controls to ``controls``
    (``ok`` false fails the scenario)."""

    def __init__(
        self, infra: Infra, name: str, workdir: Path, hold: float = 10.0, *, fan_out: int = 1,
        routed_fields: dict[str, Any] | None = None, forward_routes: bool = False,
        alerts: bool = False, spinner: bool = False,
    ) -> None:  # fmt: skip
        self.infra = infra
        self.alerts = alerts
        """Each routed owner has an alert channel: a signed webhook to the destination's
        ``/_alerts/<owner>``."""
        self.spinner = spinner
        """The first routed owner's webhook has a second route, ``SPIN_ROUTE``, through its
        transformation ``SPIN_ROUTE`` (which throws until ``spin`` changes its code) to a
        destination path nothing expects (``/<owner>/spin``): its deliveries all end
        ``transform_failed``."""
        self.fan_out = fan_out
        self.forward_routes = forward_routes
        """The ``forward_url`` owners' webhooks upgraded as ``hookbay-admin migrate`` does (their
        forward URL delivered as their route), instead of stored as before."""
        self.routed_fields = routed_fields or {}
        self.controls: dict[str, Any] = {}
        self.name = name
        self.workdir = workdir
        self.hold = hold
        """How long a fault lasts (seconds)."""
        tag = uuid.uuid4().hex[:6]
        self.env = {
            **SERVICE_ENV, "HOOKBAY_KAFKA_BOOTSTRAP": infra.kafka,
            "HOOKBAY_MONGO_URL": f"{infra.mongo}/chaos_{name}_{tag}",
            "HOOKBAY_REDIS_URL": infra.redis, "HOOKBAY_KAFKA_NAMESPACE": f"chaos.{name}.{tag}",
        }  # fmt: skip
        self.settings = settings_of(self.env, Settings)
        self.processes: dict[str, ServiceProcess] = {}
        self.targets: list[Target] = []
        self.routed: list[str] = []
        """The owners whose webhook delivers over a route."""
        self.answers = Lines(workdir / "answers.jsonl")
        self.deliveries = Lines(workdir / "deliveries.jsonl")
        self.destination_port = free_port()
        self._ports: dict[str, int] = {}
        self._stack = contextlib.AsyncExitStack()
        self._load: ServiceProcess | None = None
        self._destination: ServiceProcess | None = None
        self._mongo = db_client.connect(self.env["HOOKBAY_MONGO_URL"], socket_timeout_ms=30_000)
        self.db = db_client.database(self._mongo)

    @property
    def destination(self) -> str:
        return f"http://127.0.0.1:{self.destination_port}"

    async def __aenter__(self) -> Stack:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        await ensure_configured_topics(self.settings)
        await db_client.migrate(self.db)
        self._destination = _spawn(
            [sys.executable, "-m", "tests.chaos.destination", "--port",
             str(self.destination_port), "--log", str(self.deliveries.path)],
            self.workdir / "destination.log",
        )  # fmt: skip
        await until(self._destination_answers, 30, interval=0.1, what="destination listening")
        await self._owners()
        for role in ROLES:
            await self.start(role)

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.stop_load()
            await self._stack.aclose()
        finally:
            if self._destination is not None and not self._destination.exited:
                self._destination.terminate()
                await self._destination.wait(30)
            with contextlib.suppress(PyMongoError):  # the logs stay in the workdir
                await self._mongo.drop_database(self.db.name)
            await self._mongo.close()
            with contextlib.suppress(KafkaError, OSError, TimeoutError):
                await delete_topics(self.infra.kafka, f"{self.topics_prefix}.")

    @property
    def topics_prefix(self) -> str:
        """What every topic of this scenario's hookbay (faust's included) is named under."""
        return self.env["HOOKBAY_KAFKA_NAMESPACE"]

    async def _destination_answers(self) -> bool:
        try:
            async with async_client(timeout=2) as client:
                return (await client.get(self.destination + "/_chaos/mode")).status_code == 200
        except httpx.TransportError:
            return False

    async def _owners(self) -> None:
        users = UserRepository(self.db)
        box = SecretBox(TEST_SECRET_KEY)
        webhooks = WebhookRepository(self.db, box)
        destinations = DestinationRepository(self.db, box)
        for i in range(OWNERS):
            user = await users.create(create_user(plan="pro"))
            secret = uuid.uuid4().hex
            url = f"{self.destination}/{user.username}"
            routed: dict[str, Any] = {"forward_url": url}
            if i % 2:
                routes = []
                for copy, name in enumerate(self.routed_names, start=1):
                    await destinations.create(create_destination(
                        username=user.username, name=name, url=url + (f"/{copy}" if copy > 1 else ""),
                        **self.routed_fields,
                    ))  # fmt: skip
                    routes.append(create_route(name=f"to-{name}", destination=name))
                if self.spinner and not self.routed:
                    routes.append(await self._spin_route(user.username, url))
                routed = {"routes": tuple(routes)}
                self.routed.append(user.username)
                if self.alerts:
                    await AlertChannelRepository(self.db, box).create(AlertChannel(
                        id=new_id(IdPrefix.ALERT_CHANNEL), username=user.username,
                        type=AlertChannelType.WEBHOOK, created_at=utcnow(),
                        url=SecretStr(f"{self.destination}/_alerts/{user.username}"),
                        secret=SecretStr(ALERT_SECRET),
                    ))  # fmt: skip
            hook = await webhooks.create(create_webhook(
                username=user.username, name=f"chaos-{i}", secret=SecretStr(secret), **routed
            ))  # fmt: skip
            if self.forward_routes and "forward_url" in routed:
                hook = (await keep_forward_route(webhooks, destinations, hook, url)).webhook
            self.targets.append(Target(f"/w/{user.username}/{hook.name}", secret, hook.id))
        (self.workdir / "targets.json").write_text(
            json.dumps([{"path": t.path, "secret": t.secret} for t in self.targets])
        )

    async def _spin_route(self, username: str, url: str) -> Route:
        box = SecretBox(TEST_SECRET_KEY)
        await DestinationRepository(self.db, box).create(
            create_destination(username=username, name=SPIN_ROUTE, url=f"{url}/spin")
        )
        now = utcnow()
        await TransformationRepository(self.db, box).create(Transformation(
            id=new_id(IdPrefix.TRANSFORMATION), username=username, name=SPIN_ROUTE, code=THROWS,
            created_at=now, updated_at=now,
        ))  # fmt: skip
        return create_route(name=SPIN_ROUTE, destination=SPIN_ROUTE, transform=SPIN_ROUTE)

    async def spin(self, code: str) -> None:
        """Give the spinner's transformation ``code`` (a new version: a suspended one resumes),
        as the API does: the store, then the change log."""
        transformations = TransformationRepository(self.db, SecretBox(TEST_SECRET_KEY))
        changed = await transformations.update(self.routed[0], SPIN_ROUTE, code=code)
        async with self._publisher() as publisher:
            assert await publisher.transformation_changed(changed)

    async def start(self, key: str) -> ServiceProcess:
        """Start (or start again) the process ``key`` (a role, ``ingest-N`` for a replica, which
        comes back on its port); returns once it is ready."""
        role = key.split("-")[0]
        process = await self._stack.enter_async_context(service_process(
            role, self.env, self.workdir / f"{key}.log", port=self._ports.get(key),
        ))  # fmt: skip
        self._ports[key] = int(process.base.rsplit(":", 1)[1])
        self.processes[key] = process
        return process

    @property
    def ingest_bases(self) -> list[str]:
        return [p.base for k, p in sorted(self.processes.items()) if k.startswith("ingest")]

    async def start_load(self, rate: float) -> None:
        bases = [arg for base in self.ingest_bases for arg in ("--base", base)]
        self._load = _spawn(
            [sys.executable, "-m", "tests.support.load", str(self.workdir / "targets.json"),
             str(self.answers.path), *bases, "--rate", str(rate), "--mix"],
            self.workdir / "load.log",
        )  # fmt: skip

    async def stop_load(self) -> None:
        if self._load is not None and not self._load.exited:
            self._load.terminate()
            await self._load.wait(120)

    async def destination_mode(self, mode: str | None, paths: list[str] | None = None) -> None:
        """The destination's answers from now: ``mode`` for every path, or for ``paths`` only
        (``None``: those paths answer as every other again)."""
        asked: dict[str, Any] = {"mode": mode}
        if paths is not None:
            asked["paths"] = paths
        async with async_client(timeout=5) as client:
            answer = await client.post(self.destination + "/_chaos/mode", json=asked)
            answer.raise_for_status()

    @property
    def routed_names(self) -> list[str]:
        """The names of each routed owner's destinations."""
        return [ROUTED_DESTINATION] + [
            f"{ROUTED_DESTINATION}-{n}" for n in range(2, self.fan_out + 1)
        ]

    @property
    def routed_paths(self) -> dict[str, str]:
        """Each routed destination's path at the destination → its owner."""
        return {
            f"/{owner}" + (f"/{copy}" if copy > 1 else ""): owner
            for owner in self.routed for copy in range(1, self.fan_out + 1)
        }  # fmt: skip

    @property
    def copies(self) -> dict[int, int]:
        """Target index → the paths each of its requests must reach (``checker.check``)."""
        owners = set(self.routed)
        return {
            i: self.fan_out for i, t in enumerate(self.targets) if t.path.split("/")[2] in owners
        }

    @property
    def failing(self) -> set[int]:
        """Target indices whose events end ``failed`` (``check``): the spinner's."""
        if not self.spinner:
            return set()
        return {
            i for i, t in enumerate(self.targets) if t.path.split("/")[2] == self.routed[0]
        }  # fmt: skip

    async def pause_routed(self, paused: bool) -> None:
        """Pause (or resume) every routed owner's destinations, as the API does: the store, then
        the change log."""
        state = DestinationState.PAUSED if paused else DestinationState.ACTIVE
        await self.change_routed({
            "state": state, "state_reason": StateReason.MANUAL if paused else None,
        })  # fmt: skip

    async def change_routed(self, changes: dict[str, Any]) -> None:
        """Change every routed owner's destinations as the API does: the store, then the change
        log."""
        destinations = DestinationRepository(self.db, SecretBox(TEST_SECRET_KEY))
        async with self._publisher() as publisher:
            for username in self.routed:
                for name in self.routed_names:
                    changed = await destinations.update(username, name, changes)
                    assert await publisher.destination_changed(changed)

    @contextlib.asynccontextmanager
    async def _publisher(self) -> AsyncIterator[ConfigPublisher]:
        """The change log's publisher, as the API's (its producer stopped at the end)."""
        producer = create_producer(self.infra.kafka)
        await producer.start()
        try:

            async def send(topic: str, key: bytes, value: bytes) -> object:
                return await producer.send_and_wait(topic, value, key=key)

            yield ConfigPublisher(send, self.settings.topics.config, SecretBox(TEST_SECRET_KEY))
        finally:
            await producer.stop()

    def accepted(self, since: float = 0.0) -> list[dict[str, Any]]:
        return [a for a in self.answers() if a["status"] == 200 and a["sent"] >= since]

    def delivered(self) -> set[str]:
        return {str(d["request_id"]) for d in self.deliveries() if d["status"] == 200}

    async def in_kafka(self) -> dict[str, str]:
        """Request id → body SHA-256 of every record on the events topic, read to its end."""
        return await bodies_on_topic(self.infra.kafka, self.settings.topics.events)

    async def stored(self) -> dict[str, tuple[str, str]]:
        """Request id → (status, body SHA-256) of every event the store lists for the owners'
        webhooks, read the way an export reads them."""
        events = EventRepository(self.db)
        found: dict[str, tuple[str, str]] = {}
        for target in self.targets:
            async for event, _ in events.stream_for_webhook(target.webhook_id):
                found[event.request_id] = (
                    event.status.value,
                    hashlib.sha256(event.body).hexdigest(),
                )
        return found

    async def drained(self, timeout: float) -> dict[str, tuple[str, str]]:
        """Wait until every accepted request was delivered and is stored as ``success`` (``failed``
        for a ``failing`` target's) or the deadline passes (the checker then says what is
        missing); the stored view."""
        final = {
            str(a["request_id"]): "failed" if int(a.get("target", -1)) in self.failing else "success"
            for a in self.accepted()
        }  # fmt: skip
        deadline = time.monotonic() + timeout
        stored: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline:
            if final.keys() <= self.delivered():
                stored = await self.stored()
                if all(stored.get(r, ("",))[0] == status for r, status in final.items()):
                    return stored
            await asyncio.sleep(1)
        return await self.stored()

    async def counted_by_stats(self, on_topic: int, timeout: float) -> int:
        """The events the stats processor counted for the owners' webhooks (received and
        rejected, in hour buckets from two hours ago), once they reach ``on_topic`` or the
        deadline passes (the checker then says by how much they differ)."""
        stats = StatsRepository(self.db)
        now = utcnow()
        since, until = now - timedelta(hours=2), now + timedelta(hours=1)

        async def counted() -> int:
            total = 0
            for target in self.targets:
                hours = await stats.series(target.webhook_id, since, until, timedelta(hours=1))
                total += sum(p.counts.received + p.counts.rejected for p in hours)
            return total

        deadline = time.monotonic() + timeout
        while (n := await counted()) < on_topic and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        return n

    def exited(self) -> dict[str, int | None]:
        """The processes that ended without being told to (crashes)."""
        return {k: p.proc.returncode for k, p in self.processes.items() if p.exited}


def _spawn(argv: list[str], log_path: Path) -> ServiceProcess:
    """A helper module of this repository (``python -m tests...``), output to ``log_path``."""
    return launch(argv, {**os.environ, "PYTHONPATH": str(ROOT)}, log_path, role=argv[2])


async def delete_topics(bootstrap: str, prefix: str) -> int:
    """Delete the topics named ``prefix...``; how many. A scenario's topics go with its
    database: a broker holding every earlier scenario's partitions takes seconds longer to lead
    them again after a restart (about 6,700 partitions: 8 s from started to leading), which the
    ``kafka-restart`` scenario would measure instead of hookbay's recovery."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="chaos-cleanup")
    await admin.start()
    try:
        names = sorted(t for t in await admin.list_topics() if t.startswith(prefix))
        for start in range(0, len(names), 100):
            await admin.delete_topics(names[start : start + 100], timeout_ms=60_000)
    finally:
        await admin.close()
    return len(names)


@contextlib.asynccontextmanager
async def infrastructure() -> AsyncIterator[Infra]:
    """The private servers, started (installed when missing) and stopped again at the end; one
    run at a time (a second would stop the first's servers under it)."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with (RUN_DIR / "chaos.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(
                "chaos: another chaos run holds .cache/chaos-run; wait for it"
            ) from None
        infra = Infra()
        try:  # a server that fails to start stops the ones started before it too
            await infra.up()
            await delete_topics(infra.kafka, "chaos.")  # an interrupted run's
            yield infra
        finally:
            await infra.down()

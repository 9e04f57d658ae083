"""Configuration reaches every ingest replica, end to end: two real ingest processes,
the dashboard API on a real server, the CLI as a subprocess, the real Kafka, FerretDB and Redis.

No waits on a clock: a new webhook must be answered 200 by both replicas on the very first
request; every other change is waited for as a condition with a deadline (the latency itself is
measured by ``make bench``, docs/benchmarks.md, "Configuration propagation")."""

from __future__ import annotations

import asyncio
import hmac
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import httpx
import pytest

from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.settings import Settings
from hookbay_dashboard.settings import DashboardSettings
from hookbay_dev.http import async_client
from tests.support.dashboard import Dashboard, Owner, serve_dashboard
from tests.support.ingest import Probe, ingest_process
from tests.support.settings import settings_of
from tests.support.waiting import until

ROOT = Path(__file__).resolve().parent.parent
BODY = b'{"order": 1}'


class Replicas:
    def __init__(self, clients: list[httpx.AsyncClient]) -> None:
        self.clients = clients

    async def post(self, owner: str, name: str, secret: str | None = None) -> list[int]:
        """The status each replica answers to one signed (or unsigned) request."""
        headers = {}
        if secret is not None:
            headers["X-Service-Signature"] = hmac.new(secret.encode(), BODY, "sha256").hexdigest()
        answers = [
            await client.post(f"/w/{owner}/{name}", content=BODY, headers=headers)
            for client in self.clients
        ]
        return [a.status_code for a in answers]

    async def all_answer(
        self, expected: int, owner: str, name: str, secret: str | None = None
    ) -> None:
        async def check() -> bool:
            return await self.post(owner, name, secret) == [expected] * len(self.clients)

        await until(check, what=f"both replicas answer {expected}")


@pytest.fixture(scope="module")
async def replicas(env: dict[str, str], settings: Settings) -> AsyncIterator[Replicas]:
    await ensure_configured_topics(settings)
    # reconciliation an hour away: only the change log (or a read-through) can show a change
    penv = {**env, "HOOKBAY_VIEW_RECONCILE_INTERVAL": "3600"}
    async with (
        ingest_process(penv) as (_, first),
        ingest_process(penv) as (_, second),
        async_client(base_url=first, timeout=30) as a,
        async_client(base_url=second, timeout=30) as b,
    ):
        yield Replicas([a, b])


@pytest.fixture(scope="module")
async def dashboard(env: dict[str, str]) -> AsyncIterator[Dashboard]:
    settings = settings_of(
        env,
        DashboardSettings,
        cookie_secure=False,
        redis_key_prefix=f"hookbay:test:{uuid.uuid4().hex[:8]}:",
    )
    async with serve_dashboard(settings) as served:
        yield served


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "hookbay-admin"), *args],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


class TestNewConfigurationIsLiveAtOnce:
    async def test_create_then_send_100_times_on_both_replicas(
        self, dashboard: Dashboard, replicas: Replicas
    ) -> None:
        owner = await dashboard.owner()
        for i in range(100):
            created = await owner.client.post("/api/v1/webhooks", json={"name": f"hook-{i}"})
            assert created.status_code == 201, created.text
            assert await replicas.post(owner.username, f"hook-{i}") == [200, 200], i

    async def test_delete_then_recreate_is_live_at_once(
        self, dashboard: Dashboard, replicas: Replicas
    ) -> None:
        """Both replicas have just answered 404 for the name (and remember it); the creation
        is still answered 200 on the first request."""
        owner = await dashboard.owner()
        assert (await owner.client.post("/api/v1/webhooks", json={"name": "again"})).is_success
        for round_ in range(20):
            assert (await owner.client.delete("/api/v1/webhooks/again")).status_code == 204
            await replicas.all_answer(404, owner.username, "again")
            created = await owner.client.post("/api/v1/webhooks", json={"name": "again"})
            assert created.status_code == 201, created.text
            assert await replicas.post(owner.username, "again") == [200, 200], round_

    async def test_cli_create_then_send(
        self, env: dict[str, str], dashboard: Dashboard, replicas: Replicas
    ) -> None:
        owner = await dashboard.owner()
        for i in range(5):
            done = cli(env, "webhook", "create", owner.username, f"cli-{i}")
            assert done.returncode == 0, done.stderr
            assert "warning" not in done.stderr
            assert await replicas.post(owner.username, f"cli-{i}") == [200, 200]
        done = cli(env, "webhook", "deactivate", owner.username, "cli-0")
        assert done.returncode == 0, done.stderr
        await replicas.all_answer(403, owner.username, "cli-0")


class TestChangesReachEveryReplica:
    async def test_activation_secret_destination_deletion(
        self, dashboard: Dashboard, replicas: Replicas, settings: Settings
    ) -> None:
        owner = await dashboard.owner()
        api = owner.client
        assert (await api.post("/api/v1/webhooks", json={"name": "live"})).status_code == 201
        await replicas.all_answer(200, owner.username, "live")
        await api.post("/api/v1/webhooks/live/deactivate")
        await replicas.all_answer(403, owner.username, "live")
        await api.post("/api/v1/webhooks/live/activate")
        await replicas.all_answer(200, owner.username, "live")
        await api.patch("/api/v1/webhooks/live", json={"secret": "first-secret"})
        await replicas.all_answer(401, owner.username, "live")
        await replicas.all_answer(200, owner.username, "live", "first-secret")
        rotated = await api.patch("/api/v1/webhooks/live", json={"generate_secret": True})
        new_secret = rotated.json()["generated_secret"]
        await replicas.all_answer(401, owner.username, "live", "first-secret")
        await replicas.all_answer(200, owner.username, "live", new_secret)
        await api.patch("/api/v1/webhooks/live", json={"secret": None})
        await replicas.all_answer(200, owner.username, "live")
        await self._forward_url_reaches_both(api, owner, replicas, settings)
        await api.delete("/api/v1/webhooks/live")
        await replicas.all_answer(404, owner.username, "live")

    @staticmethod
    async def _forward_url_reaches_both(
        api: httpx.AsyncClient, owner: Owner, replicas: Replicas, settings: Settings
    ) -> None:
        """The event each replica captures carries the destination set a moment before."""
        url = "http://127.0.0.1:9/new-destination"
        changed = await api.patch("/api/v1/webhooks/live", json={"forward_url": url})
        assert changed.status_code == 200, changed.text
        probe = Probe(settings.kafka_bootstrap, settings.topics.events)
        await probe.start()
        try:
            for client in replicas.clients:

                async def stamped(client: httpx.AsyncClient = client) -> bool:
                    answer = await client.post(f"/w/{owner.username}/live", content=BODY)
                    assert answer.status_code == 200
                    (event,) = await probe.events(answer.json()["requestId"])
                    return event.forward_url == url

                await until(stamped, what="the new forward URL on the event")
        finally:
            await probe.stop()

    async def test_plan_change_and_user_deletion(
        self, dashboard: Dashboard, replicas: Replicas
    ) -> None:
        admin = await dashboard.owner(admin=True)
        owner = await dashboard.owner(plan="pro")
        assert (await owner.client.post("/api/v1/webhooks", json={"name": "x"})).status_code == 201
        await replicas.all_answer(200, owner.username, "x")
        changed = await admin.client.patch(
            f"/api/v1/admin/users/{owner.username}", json={"plan": "free"}
        )
        assert changed.status_code == 200, changed.text

        async def limited(client: httpx.AsyncClient) -> bool:
            """Within the free plan's 10/min, a pro owner would never see a 429."""
            answer = await client.post(f"/w/{owner.username}/x", content=BODY)
            return answer.status_code == 429 and answer.json()["plan"] == "free"

        for client in replicas.clients:
            await until(partial(limited, client), what="the free plan's 429")
        deleted = await admin.client.delete(f"/api/v1/admin/users/{owner.username}")
        assert deleted.status_code == 204, deleted.text

        async def unknown() -> bool:
            answers = await asyncio.gather(
                *(c.post(f"/w/{owner.username}/x", content=BODY) for c in replicas.clients)
            )
            return all(
                a.status_code == 403 and a.json()["error"] == "User not found" for a in answers
            )

        await until(unknown, what="both replicas forget the deleted user")
        assert (await owner.client.get("/api/v1/webhooks")).status_code == 401  # token gone
        self_delete = await admin.client.delete(f"/api/v1/admin/users/{admin.username}")
        assert self_delete.status_code == 400

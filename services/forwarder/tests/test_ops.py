"""``/healthz`` and ``/readyz`` of the consumer processes."""

from __future__ import annotations

import httpx

from hookbay_common.metrics import new_registry
from hookbay_forwarder.ops import create_ops_app


async def get(healthy: bool, checks: dict[str, bool], path: str) -> httpx.Response:
    app = create_ops_app(lambda: checks, new_registry(), lambda: healthy)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://ops"
    ) as client:
        return await client.get(path)


class TestOpsApp:
    async def test_healthz_fails_only_when_wedged(self) -> None:
        not_ready = {"kafka": False}
        alive = await get(True, not_ready, "/healthz")  # the broker away: not a restart case
        assert (alive.status_code, alive.json()) == (200, {"status": "ok"})
        wedged = await get(False, not_ready, "/healthz")
        assert (wedged.status_code, wedged.json()) == (503, {"status": "wedged"})

    async def test_readyz_lists_every_check(self) -> None:
        ready = await get(True, {"kafka": True, "producer": True}, "/readyz")
        assert (ready.status_code, ready.json()) == (
            200, {"ready": True, "kafka": True, "producer": True},
        )  # fmt: skip
        not_ready = await get(True, {"kafka": True, "producer": False}, "/readyz")
        assert not_ready.status_code == 503
        assert not_ready.json()["producer"] is False

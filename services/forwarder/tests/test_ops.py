"""``/healthz`` and ``/readyz`` of the consumer processes."""

from __future__ import annotations

import httpx

from hookbay_common.metrics import new_registry
from hookbay_common.process import create_ops_app


async def get(
    healthy: bool, checks: dict[str, bool], path: str, method: str = "GET"
) -> httpx.Response:
    app = create_ops_app(lambda: checks, new_registry(), lambda: healthy)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://ops"
    ) as client:
        return await client.request(method, path)


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

    async def test_metrics_answers_get_and_refuses_other_methods(self) -> None:
        """``/metrics`` itself, not a redirect to ``/metrics/``; a POST is a 405 with Allow."""
        scrape = await get(True, {}, "/metrics")
        assert scrape.status_code == 200
        assert "process_cpu_seconds_total" in scrape.text
        posted = await get(True, {}, "/metrics", "POST")
        assert posted.status_code == 405
        assert set(posted.headers["allow"].split(", ")) == {"GET", "HEAD"}

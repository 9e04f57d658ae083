"""``python -m hookbay_dashboard`` as deployed: health, readiness, metrics, JSON logs with the
request id, no secret or stack trace in a log or a response, and a clean stop on SIGTERM."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from hookbay_common.db import Database, TokenRepository, UserRepository
from hookbay_common.plans import load_plans
from hookbay_dashboard.accounts.service import AccountService
from hookbay_dev.http import async_client
from tests.support.factories import unique_name
from tests.support.processes import service_process


async def _user_token(db: Database) -> str:
    accounts = AccountService(UserRepository(db), TokenRepository(db), load_plans(None))
    _, issued = await accounts.create_user(unique_name("u"))
    return issued.token


class TestDashboardProcess:
    async def test_ops_endpoints_logs_and_sigterm(
        self, env: dict[str, str], db: Database, tmp_path: Path
    ) -> None:
        token = await _user_token(db)
        penv = {**env, "HOOKBAY_COOKIE_SECURE": "false"}
        async with service_process("dashboard", penv, tmp_path / "dashboard.log") as dashboard:
            ready = (await dashboard.get("/readyz")).json()
            assert ready == {"ready": True, "kafka": True, "mongo": True, "redis": True}
            assert (await dashboard.get("/healthz")).json() == {"status": "ok"}
            headers = {"Authorization": f"Bearer {token}"}
            async with async_client(base_url=dashboard.base, headers=headers) as client:
                created = await client.post(
                    "/api/v1/webhooks", json={"name": "orders", "secret": "top-secret-value"}
                )
                assert created.status_code == 201, created.text
                missing = await client.get("/api/v1/webhooks/nope")
                assert missing.status_code == 404
                assert missing.headers["x-request-id"]
                broken = await client.post("/api/v1/webhooks", content=b"{not json")
                assert broken.status_code == 422
                assert "Traceback" not in broken.text
            metrics = (await dashboard.get("/metrics")).text

            assert (
                'hookbay_dashboard_requests_total{method="GET",route="/api/v1/webhooks/{name}",'
                'status="404"} 1.0' in metrics
            )
            dashboard.terminate()
            assert await dashboard.wait() in (0, -signal.SIGTERM)
        log = dashboard.log()
        assert "top-secret-value" not in log
        assert token not in log
        lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
        assert lines, log
        assert all(line["service"] == "dashboard-api" for line in lines)
        assert "dashboard_stopped" in dashboard.log_events()

"""The dashboard API served by a real uvicorn server on the real database, Kafka and Redis, with
a fast live stream (heartbeats every 0.3 s), for the owner CLI to talk to."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import Dashboard, serve_dashboard


@pytest.fixture(scope="session")
def cli_dashboard_settings(env: dict[str, str]) -> DashboardSettings:
    fields: dict[str, Any] = {key.removeprefix("HOOKBAY_").lower(): v for key, v in env.items()}
    return DashboardSettings(
        **fields, cookie_secure=False, redis_key_prefix=f"hookbay:test:{uuid.uuid4().hex[:8]}:",
        tail_poll_interval=0.1, tail_heartbeat=0.3,
    )  # fmt: skip


@pytest.fixture(scope="session")
async def cli_dashboard(cli_dashboard_settings: DashboardSettings) -> AsyncIterator[Dashboard]:
    async with serve_dashboard(cli_dashboard_settings) as served:
        yield served

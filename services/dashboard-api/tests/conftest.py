"""The dashboard API served by a real uvicorn server on a free port, on the real database,
Kafka and Redis; owners are created through the repositories and act with their API tokens."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import Dashboard, serve_dashboard
from tests.support.settings import settings_of


@pytest.fixture(scope="session")
def dashboard_settings(env: dict[str, str]) -> DashboardSettings:
    return settings_of(
        env,
        DashboardSettings,
        cookie_secure=False,
        redis_key_prefix=f"hookbay:test:{uuid.uuid4().hex[:8]}:",
        login_limit_per_address=10_000,  # every test logs in from 127.0.0.1
    )


@pytest.fixture(scope="session")
async def dashboard(dashboard_settings: DashboardSettings) -> AsyncIterator[Dashboard]:
    async with serve_dashboard(dashboard_settings) as served:
        yield served

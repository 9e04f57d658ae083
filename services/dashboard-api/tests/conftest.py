"""The dashboard API served by a real uvicorn server on a free port, on the real database,
Kafka and Redis; owners are created through the repositories and act with their API tokens."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import Dashboard, serve_dashboard


@pytest.fixture(scope="session")
def dashboard_settings(env: dict[str, str]) -> DashboardSettings:
    fields: dict[str, Any] = {key.removeprefix("HOOKBAY_").lower(): v for key, v in env.items()}
    return DashboardSettings(
        **fields,
        cookie_secure=False,
        redis_key_prefix=f"hookbay:test:{uuid.uuid4().hex[:8]}:",
        login_limit_per_address=10_000,  # every test logs in from 127.0.0.1
    )


@pytest.fixture(scope="session")
async def dashboard(dashboard_settings: DashboardSettings) -> AsyncIterator[Dashboard]:
    async with serve_dashboard(dashboard_settings) as served:
        yield served

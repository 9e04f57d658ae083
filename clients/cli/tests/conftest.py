"""The dashboard API served by a real uvicorn server on the real database, Kafka and Redis, with
a fast live stream (heartbeats every 0.3 s), for the owner CLI to talk to."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import Dashboard, Owner, serve_dashboard


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


@pytest.fixture
async def owner(cli_dashboard: Dashboard) -> Owner:
    """An owner of the CLI tests' dashboard."""
    return await cli_dashboard.owner()


@pytest.fixture
def owner_env(cli_dashboard: Dashboard, owner: Owner, tmp_path: Path) -> dict[str, str]:
    """The environment ``hookbay`` runs in as ``owner``: its own config home, the server and
    the owner's token."""
    return {
        "XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path),
        "HOOKBAY_SERVER": cli_dashboard.url, "HOOKBAY_TOKEN": owner.token,
    }  # fmt: skip

"""The ``hookbay`` commands as a person runs them, against the real dashboard API."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.dashboard import Dashboard, Owner
from tests.support.factories import create_event, create_webhook

HOOKBAY = os.path.join(os.path.dirname(sys.executable), "hookbay")


async def hookbay(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        HOOKBAY, *args, env={**os.environ, **env}, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(stdin.encode() if stdin else None), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
async def owner(cli_dashboard: Dashboard) -> Owner:
    return await cli_dashboard.owner()


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """A user with no saved login and nothing in the environment."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}
    for name in ("HOOKBAY_SERVER", "HOOKBAY_TOKEN"):
        env[name] = ""
    return env


class TestLogin:
    async def test_login_saves_0600_then_commands_use_it(
        self, cli_dashboard: Dashboard, owner: Owner, home: dict[str, str]
    ) -> None:
        code, out, err = await hookbay(
            "login", "--server", cli_dashboard.url, "--token", owner.token, env=home
        )
        assert code == 0, err
        path = Path(home["XDG_CONFIG_HOME"]) / "hookbay" / "config.toml"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert f"as {owner.username}" in out
        assert owner.token not in out + err
        code, out, _ = await hookbay("whoami", env=home)
        assert (code, out.split()[0]) == (0, owner.username)
        assert (await hookbay("logout", env=home))[0] == 0
        code, _, err = await hookbay("whoami", env=home)
        assert code == 2
        assert "not logged in" in err

    async def test_a_wrong_token_is_refused_and_not_saved(
        self, cli_dashboard: Dashboard, home: dict[str, str]
    ) -> None:
        code, _, err = await hookbay(
            "login", "--server", cli_dashboard.url, "--token", "hbk_wrong", env=home
        )
        assert code == 2
        assert "token is wrong, revoked or expired" in err
        assert "hbk_wrong" not in err
        assert not (Path(home["XDG_CONFIG_HOME"]) / "hookbay").exists()


class TestOwnerCommands:
    async def test_webhooks_and_events(
        self, cli_dashboard: Dashboard, owner: Owner, home: dict[str, str], tmp_path: Path
    ) -> None:
        env = {**home, "HOOKBAY_SERVER": cli_dashboard.url, "HOOKBAY_TOKEN": owner.token}
        webhook = await cli_dashboard.runtime.webhooks.create(create_webhook(
            username=owner.username, name="orders", forward_url="http://127.0.0.1:9/in",
        ))  # fmt: skip
        events = [
            create_event(webhook_id=webhook.id, username=owner.username, webhook_name="orders")
            for _ in range(2)
        ]
        await cli_dashboard.runtime.events.upsert_many(events)
        code, out, _ = await hookbay("webhooks", "list", env=env)
        assert code == 0
        assert out.splitlines()[1].split()[:2] == ["orders", "yes"]
        code, out, _ = await hookbay("events", "list", "orders", "--json", env=env)
        listed: dict[str, Any] = json.loads(out)
        assert [e["id"] for e in listed["items"]] == [e.id for e in reversed(events)]
        code, out, _ = await hookbay("events", "show", events[0].id, env=env)
        assert code == 0
        assert f"id: {events[0].id}" in out
        code, out, err = await hookbay("events", "replay", events[0].id, env=env)
        assert code == 0, err
        target = tmp_path / "orders.json"
        code, _, err = await hookbay("events", "export", "orders", "--output", str(target), env=env)
        assert code == 0, err
        assert [e["id"] for e in json.loads(target.read_text())] == [e.id for e in events]

    async def test_another_owners_things_are_404_exit_2(
        self, cli_dashboard: Dashboard, owner: Owner, home: dict[str, str]
    ) -> None:
        stranger = await cli_dashboard.owner()
        await cli_dashboard.runtime.webhooks.create(
            create_webhook(username=owner.username, name="orders")
        )
        env = {**home, "HOOKBAY_SERVER": cli_dashboard.url, "HOOKBAY_TOKEN": stranger.token}
        for args in (("webhooks", "show", "orders"), ("events", "list", "orders")):
            code, _, err = await hookbay(*args, env=env)
            assert code == 2, args
            assert err.startswith("hookbay: ")


class TestStartUp:
    def test_help_costs_well_under_a_third_of_a_second_of_cpu(self) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = subprocess.run([HOOKBAY, "--help"], capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        assert b"listen" in result.stdout
        assert cpu <= 0.3, cpu

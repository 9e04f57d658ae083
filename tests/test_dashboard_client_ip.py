"""The address the dashboard's login limiter counts attempts by, on the real server
(``python -m hookbay_dashboard``), where requests arrive from a loopback peer, as behind a sidecar
proxy: ``X-Forwarded-For`` is believed only from ``HOOKBAY_TRUSTED_PROXIES``, never because the
server in front of the app trusts loopback peers by default (then anyone could spread guesses over
made-up addresses, or lock an address out by naming it)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.factories import unique_name
from tests.support.processes import service_process

PER_ADDRESS = 2


async def attempts(base: str, forwarded_for: list[str]) -> list[int]:
    """The status of one failed login per entry, each as another user, from that address."""
    async with httpx.AsyncClient(base_url=base) as client:
        return [
            (
                await client.post(
                    "/api/v1/auth/login",
                    json={"username": unique_name("nobody"), "password": "wrong-password"},
                    headers={"X-Forwarded-For": address},
                )
            ).status_code
            for address in forwarded_for
        ]


@pytest.mark.parametrize(
    ("trusted", "spread", "named"),
    [("", [401, 401, 429], [429, 429, 429]), ("127.0.0.1/32", [401, 401, 401], [401, 401, 429])],
    ids=["none", "loopback"],
)
async def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(
    env: dict[str, str], tmp_path: Path, trusted: str, spread: list[int], named: list[int]
) -> None:
    penv = {
        **env, "HOOKBAY_TRUSTED_PROXIES": trusted, "HOOKBAY_REDIS_KEY_PREFIX": unique_name("ip") + ":",
        "HOOKBAY_LOGIN_LIMIT_PER_ADDRESS": str(PER_ADDRESS), "HOOKBAY_LOGIN_LIMIT_PER_USER": "100",
    }  # fmt: skip
    async with service_process("dashboard", penv, tmp_path / "dashboard.log") as dashboard:
        # three addresses: counted apart only when the proxy is trusted
        assert await attempts(dashboard.base, ["203.0.113.1", "203.0.113.2", "203.0.113.3"]) == (
            spread
        )
        # one named address, three times: its own limit when believed, else the peer's (spent)
        assert await attempts(dashboard.base, ["198.51.100.7"] * 3) == named

"""The dashboard API on a real uvicorn server in the test's event loop, and owners to call it.

``Dashboard.owner()`` creates a user (with a password) through the repositories and returns an
``Owner`` whose ``client`` sends the user's API token; ``Owner.login()`` gives a cookie client.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from argon2 import PasswordHasher

from hookbay_common.models import Role, User
from hookbay_dashboard.accounts.service import AccountService
from hookbay_dashboard.app import create_app
from hookbay_dashboard.runtime import Runtime
from hookbay_dashboard.settings import DashboardSettings
from hookbay_dev.http import async_client
from tests.support.factories import unique_name
from tests.support.net import free_port

PASSWORD = "correct horse battery staple"
_FAST_HASHER = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1)


@dataclass
class Owner:
    user: User
    token: str
    client: httpx.AsyncClient
    base_url: str
    _extra: list[httpx.AsyncClient] = field(default_factory=list)

    @property
    def username(self) -> str:
        return self.user.username

    async def login(self) -> tuple[httpx.AsyncClient, str]:
        """A client holding a session cookie, and the session's CSRF token."""
        client = async_client(base_url=self.base_url, timeout=30)
        self._extra.append(client)
        response = await client.post(
            "/api/v1/auth/login", json={"username": self.username, "password": PASSWORD}
        )
        assert response.status_code == 200, response.text
        return client, response.json()["csrf_token"]

    async def close(self) -> None:
        for client in [self.client, *self._extra]:
            await client.aclose()


@dataclass
class Dashboard:
    url: str
    runtime: Runtime
    owners: list[Owner] = field(default_factory=list)

    @property
    def settings(self) -> DashboardSettings:
        return self.runtime.settings

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        return async_client(base_url=self.url, timeout=30, **kwargs)

    async def owner(self, *, plan: str = "pro", admin: bool = False) -> Owner:
        """A new user with a password and an API token."""
        rt = self.runtime
        accounts = AccountService(rt.users, rt.tokens, rt.plans, hasher=_FAST_HASHER)
        user, issued = await accounts.create_user(
            unique_name("u"), plan=plan, admin=admin, password=PASSWORD
        )
        assert user.role is (Role.ADMIN if admin else Role.USER)
        client = self.client(headers={"Authorization": f"Bearer {issued.token}"})
        owner = Owner(user, issued.token, client, self.url)
        self.owners.append(owner)
        return owner


@contextlib.asynccontextmanager
async def serve_dashboard(settings: DashboardSettings) -> AsyncIterator[Dashboard]:
    """Serve ``create_app(settings)`` on 127.0.0.1 until the block ends."""
    port = free_port()
    app = create_app(settings.model_copy(update={"dashboard_port": port}))
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_config=None, access_log=False,
        timeout_keep_alive=int(settings.keepalive_timeout),  # as python -m hookbay_dashboard
        timeout_graceful_shutdown=10,
    )  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    await app.state.runtime.kafka_connected.wait()
    served = Dashboard(f"http://127.0.0.1:{port}", app.state.runtime)
    try:
        yield served
    finally:
        for owner in served.owners:
            await owner.close()
        server.should_exit = True
        await task

"""The dashboard in a real browser against the real stack.

One stack per test worker: ingest, forwarder, recorder and the dashboard (API + built SPA) as
their own processes on the worker's database and a topic namespace of its own, a local
destination (``receiver``); Debian's Chromium driven by Playwright (never a downloaded browser),
nothing able to leave 127.0.0.1 (``--host-resolver-rules``). Each test gets a fresh browser
context (cookies, storage) and its own owner.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from argon2 import PasswordHasher
from playwright.async_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    async_playwright,
    expect,
)

from hookbay_common.db import Database, EventRepository, TokenRepository, UserRepository
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.models import Event, User
from hookbay_common.plans import load_plans
from hookbay_common.settings import Settings
from hookbay_dashboard.accounts.service import AccountService
from hookbay_dashboard.spa import STATIC_DIR
from hookbay_dev.http import async_client
from tests.support.factories import unique_name
from tests.support.processes import ServiceProcess, service_process
from tests.support.receiver import Receiver
from tests.support.settings import settings_of
from tests.support.waiting import until

CHROMIUM = "/usr/lib/chromium/chromium"  # /usr/bin/chromium is a wrapper script
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]  # fmt: skip
PASSWORD = "correct horse battery staple"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
_FAST_HASHER = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1)


@dataclass
class Owner:
    user: User
    token: str
    api: httpx.AsyncClient

    @property
    def username(self) -> str:
        return self.user.username


@dataclass
class Stack:
    ingest: ServiceProcess
    dashboard: ServiceProcess
    db: Database
    receiver: Receiver
    owners: list[Owner] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.dashboard.base

    def dashboard_client(self, token: str) -> httpx.AsyncClient:
        return async_client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    async def owner(self, *, admin: bool = False) -> Owner:
        """A user with a password and an API token, acting on the dashboard API with it."""
        accounts = AccountService(
            UserRepository(self.db), TokenRepository(self.db), load_plans(None),
            hasher=_FAST_HASHER,
        )  # fmt: skip
        user, issued = await accounts.create_user(
            unique_name("u"), plan="pro", admin=admin, password=PASSWORD
        )
        owner = Owner(user, issued.token, self.dashboard_client(issued.token))
        self.owners.append(owner)
        return owner

    async def webhook(self, owner: Owner, **fields: Any) -> dict[str, Any]:
        """A webhook created through the API (so ingest hears of it as in production)."""
        body = {"name": unique_name("hook").replace("_", "-"), **fields}
        response = await owner.api.post("/api/v1/webhooks", json=body)
        assert response.status_code == 201, response.text
        hook: dict[str, Any] = response.json()
        return hook

    async def send(
        self,
        hook: dict[str, Any],
        body: bytes,
        content_type: str = "application/json",
        secret: str | None = None,
        headers: dict[str, str] | None = None,
        status: int = 200,
    ) -> str:
        """POST to the webhook's URL as a sender does; the request id of its answer."""
        sent = {"Content-Type": content_type, **(headers or {})}
        if secret is not None:
            digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            sent["X-Service-Signature"] = f"sha256={digest}"
        async with async_client(timeout=30) as client:
            response = await client.post(hook["url"], content=body, headers=sent)
        assert response.status_code == status, response.text
        request_id: str = response.json()["requestId"]
        return request_id

    async def event(self, request_id: str, status: str | None = None) -> Event:
        """The event once the recorder stored it (with ``status``, when given)."""
        events = EventRepository(self.db)
        found: Event | None = None

        async def stored() -> bool:
            nonlocal found
            found = await events.get_by_request_id(request_id)
            return found is not None and (status is None or found.status.value == status)

        await until(stored, 30, interval=0.1, what=f"event {request_id} stored ({status})")
        assert found is not None
        return found


@pytest.fixture(scope="session")
async def stack(
    env: dict[str, str], db: Database, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    if not (STATIC_DIR / "index.html").is_file():
        pytest.fail("the SPA is not built: `make web` (make test builds it)")
    logs = tmp_path_factory.mktemp("stack")
    penv = {
        **env, "HOOKBAY_KAFKA_NAMESPACE": f"ui.{uuid.uuid4().hex[:8]}",
        "HOOKBAY_COOKIE_SECURE": "false", "HOOKBAY_TAIL_POLL_INTERVAL": "0.2",
        "HOOKBAY_LOGIN_LIMIT_PER_ADDRESS": "10000", "HOOKBAY_LOGIN_LIMIT_PER_USER": "1000",
        "HOOKBAY_REPLAY_POLL_INTERVAL": "0.5",
    }  # fmt: skip
    settings = settings_of(penv, Settings)
    await ensure_configured_topics(settings)
    async with (
        service_process("recorder", penv, logs / "recorder.log"),
        service_process("forwarder", penv, logs / "forwarder.log"),
        service_process("ingest", penv, logs / "ingest.log") as ingest,
    ):
        denv = {**penv, "HOOKBAY_PUBLIC_URL": ingest.base}
        async with service_process("dashboard", denv, logs / "dashboard.log") as dashboard:
            stack = Stack(ingest, dashboard, db, receiver)
            try:
                yield stack
            finally:
                for owner in stack.owners:
                    await owner.api.aclose()


@pytest.fixture(scope="session")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            env={**os.environ, "HOME": str(tmp_path_factory.mktemp("browser-home"))},
        )  # fmt: skip
        print(f"browser: Chromium {browser.version} (Debian)", file=sys.stderr)  # noqa: T201
        yield browser
        await browser.close()


@dataclass
class Session:
    """A browser context and page of one test, and what the page reported."""

    context: BrowserContext
    page: Page
    base: str
    problems: list[str] = field(default_factory=list)

    async def login(self, owner: Owner, path: str = "/") -> None:
        """Open ``path``; the app sends the visitor to its login page first, then back."""
        page = self.page
        await page.goto(self.base + path)
        await page.get_by_label("Username").fill(owner.username)
        await page.get_by_label("Password").fill(PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_url(lambda url: "/login" not in url)


def _watch(session: Session) -> None:
    def console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
            session.problems.append(f"CSP: {message.text}")

    session.page.on("console", console)
    session.page.on("pageerror", lambda exc: session.problems.append(f"page error: {exc}"))
    session.page.on("dialog", lambda dialog: session.problems.append(f"dialog: {dialog.message}"))


ACTION_TIMEOUT_MS = 15_000
"""How long an action or an assertion waits for the page: a save and the list's refetch go
through the real API and store on a box the parallel tests share (Playwright's assertions
otherwise give up after 5 s, its actions after 30)."""
expect.set_options(timeout=ACTION_TIMEOUT_MS)


@pytest.fixture
async def session(browser: Browser, stack: Stack) -> AsyncIterator[Session]:
    context = await browser.new_context(
        viewport={"width": 1280, "height": 900}, base_url=stack.url, color_scheme="light",
        permissions=["clipboard-read", "clipboard-write"], reduced_motion="reduce",
    )  # fmt: skip
    page = await context.new_page()
    page.set_default_timeout(ACTION_TIMEOUT_MS)
    session = Session(context, page, stack.url)
    _watch(session)
    try:
        yield session
    finally:
        await context.close()
    assert session.problems == [], session.problems

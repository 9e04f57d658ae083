"""The other screens and the cross-cutting behaviour: webhooks, tokens, admin, the keyboard,
bodies that try to run script, an expired session."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

from playwright.async_api import expect

from hookbay_common.db import SessionRepository
from tests.browser.conftest import PASSWORD, Session, Stack
from tests.support.processes import service_process


class TestWebhooks:
    async def test_create_checks_the_name_first_then_shows_the_secret_once(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        page = session.page
        await session.login(owner, "/webhooks")
        sent: list[str] = []
        page.on("request", lambda r: sent.append(r.method) if "/api/v1/webhooks" in r.url else None)

        await page.get_by_label("Name").fill("Bad_Name")
        await page.get_by_role("button", name="Create webhook").click()
        await expect(
            page.get_by_text("Lower-case letters, digits and single hyphens")
        ).to_be_visible()
        assert "POST" not in sent
        await page.get_by_label("Name").fill("orders-eu")
        await page.get_by_role("button", name="Create webhook").click()

        dialog = page.get_by_role("dialog", name="Signing secret")
        await expect(dialog.get_by_text("Shown this once.")).to_be_visible()
        secret = await dialog.locator("code").inner_text()
        assert len(secret) >= 32
        await dialog.get_by_role("button", name="Done").click()
        await expect(page.get_by_role("heading", name="orders-eu")).to_be_visible()
        await expect(page.get_by_text(secret)).to_have_count(0)
        assert sent.count("POST") == 1

    async def test_server_refusals_show_inline(self, stack: Stack, session: Session) -> None:
        owner = await stack.owner()
        await stack.webhook(owner, name="taken")
        page = session.page
        await session.login(owner, "/webhooks")
        await page.get_by_label("Name").fill("taken")
        await page.get_by_role("button", name="Create webhook").click()
        await expect(page.get_by_role("alert")).to_contain_text("taken")

    async def test_deactivate_and_delete_with_the_typed_name(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        page = session.page
        await session.login(owner, "/webhooks")
        await page.get_by_role("button", name="Deactivate").click()
        await expect(page.get_by_text("○ Inactive")).to_be_visible()
        assert (await owner.api.get(f"/api/v1/webhooks/{hook['name']}")).json()["active"] is False

        await page.get_by_role("button", name="Delete").click()
        dialog = page.get_by_role("dialog", name=f"Delete {hook['name']}?")
        confirm = dialog.get_by_role("button", name="Delete webhook")
        await expect(confirm).to_be_disabled()
        await dialog.get_by_label(f"Type {hook['name']}").fill(hook["name"])
        await confirm.click()
        await expect(page.get_by_text("No webhooks yet.")).to_be_visible()
        assert (await owner.api.get(f"/api/v1/webhooks/{hook['name']}")).status_code == 404

    async def test_the_copied_sample_curl_is_accepted_by_ingest(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        await stack.webhook(owner)
        page = session.page
        await session.login(owner, "/webhooks")
        await page.get_by_role("button", name="Copy sample curl").click()
        command = await page.evaluate("navigator.clipboard.readText()")
        run = await asyncio.create_subprocess_exec(
            "bash", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await run.communicate()
        assert run.returncode == 0, err.decode()
        request_id = json.loads(out)["requestId"]
        assert (await stack.event(request_id)).body == b'{"hello":"world"}'

    async def test_the_signed_sample_curl_verifies_with_the_secret(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        secret = "the-secret-of-the-sample-test"
        await stack.webhook(owner, secret=secret)
        page = session.page
        await session.login(owner, "/webhooks")
        await page.get_by_role("button", name="Copy signed sample curl").click()
        command = await page.evaluate("navigator.clipboard.readText()")
        run = await asyncio.create_subprocess_exec(
            "bash", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOOKBAY_SECRET": secret},
        )  # fmt: skip
        out, err = await run.communicate()
        assert run.returncode == 0, err.decode()
        event = await stack.event(json.loads(out)["requestId"])
        assert event.signature_valid is True


class TestTokens:
    async def test_create_shows_once_then_revoke_after_confirming(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        page = session.page
        await session.login(owner, "/tokens")
        await page.get_by_label("Token name").fill("ci-deploy")
        await page.get_by_role("button", name="Create token").click()
        dialog = page.get_by_role("dialog", name="New API token")
        token = await dialog.locator("code").inner_text()
        await dialog.get_by_role("button", name="Done").click()
        async with stack.dashboard_client(token) as client:
            assert (await client.get("/api/v1/me")).status_code == 200
        await page.reload()
        row = page.get_by_role("row", name=re.compile("ci-deploy"))
        await expect(row).not_to_contain_text("never")  # last used: just now

        await row.get_by_role("button", name="Revoke ci-deploy").click()
        await page.get_by_role("dialog").get_by_role("button", name="Revoke token").click()
        await expect(row).to_have_count(0)
        async with stack.dashboard_client(token) as client:
            assert (await client.get("/api/v1/me")).status_code == 401


class TestAdmin:
    async def test_an_admin_manages_users(self, stack: Stack, session: Session) -> None:
        admin, user = await stack.owner(admin=True), await stack.owner()
        page = session.page
        await session.login(admin)
        await page.get_by_role("link", name="Admin").click()
        await page.get_by_label(f"Plan of {user.username}").select_option("free")
        # the button is disabled while the change is saving too: wait for the answer itself
        async with page.expect_response(
            lambda r: r.request.method == "PATCH" and f"/admin/users/{user.username}" in r.url
        ) as saved:
            await page.get_by_role("button", name=f"Save {user.username}").click()
        assert (await saved.value).ok
        await expect(page.get_by_role("button", name=f"Save {user.username}")).to_be_disabled()
        users = (await admin.api.get("/api/v1/admin/users")).json()
        assert {u["username"]: u["plan"] for u in users}[user.username] == "free"

    async def test_a_user_has_no_admin_item_and_gets_403(
        self, stack: Stack, session: Session
    ) -> None:
        user = await stack.owner()
        page = session.page
        await session.login(user)
        await expect(page.get_by_role("link", name="Webhooks")).to_be_visible()
        await expect(page.get_by_role("link", name="Admin")).to_have_count(0)
        await page.goto("/admin")
        await expect(page.get_by_role("heading", name="Forbidden (403)")).to_be_visible()


class TestKeyboard:
    async def test_move_open_go_back_copy_and_help(self, stack: Stack, session: Session) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        ids = [await stack.send(hook, b'{"n": %d}' % n) for n in range(3)]
        for request_id in ids:
            await stack.event(request_id)
        newest, middle = ids[2], ids[1]
        page = session.page
        await session.login(owner, f"/webhooks/{hook['name']}/events")
        rows = page.get_by_role("list", name=f"Events of {hook['name']}").get_by_role("link")
        await expect(rows).to_have_count(3)

        await page.keyboard.press("j")
        await page.keyboard.press("j")
        await expect(rows.filter(has_text=middle)).to_have_attribute("aria-current", "true")
        await page.keyboard.press("k")
        await expect(rows.filter(has_text=newest)).to_have_attribute("aria-current", "true")
        await page.keyboard.press("c")
        assert await page.evaluate("navigator.clipboard.readText()") == newest
        await page.keyboard.press("Enter")
        await expect(page.get_by_role("heading", name=newest)).to_be_visible()
        await page.keyboard.press("Escape")
        await expect(rows.filter(has_text=newest)).to_have_attribute("aria-current", "true")

        await page.keyboard.press("/")
        await expect(page.get_by_role("searchbox", name="Request ID or text")).to_be_focused()
        await page.keyboard.type("jk")  # typed, not shortcuts
        await expect(page.get_by_role("searchbox", name="Request ID or text")).to_have_value("jk")
        await expect(rows.filter(has_text=newest)).to_have_attribute("aria-current", "true")
        await page.get_by_role("searchbox", name="Request ID or text").press("Escape")
        await page.locator("body").click(position={"x": 5, "y": 400})
        await page.keyboard.press("?")
        help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
        await expect(help_dialog).to_be_visible()
        await page.keyboard.press("Escape")
        await expect(help_dialog).to_be_hidden()
        await page.keyboard.press("r")
        await expect(page.get_by_role("dialog", name="Replay this event?")).to_be_visible()


class TestHostileBodies:
    async def test_bodies_are_text_in_every_view(self, stack: Stack, session: Session) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        bodies = [
            (b"<img src=x onerror=alert(1)>", "text/html"),
            (b'{"x": "<img src=x onerror=alert(1)>"}', "application/json"),
            (b"<a><img src=x onerror=alert(1)/></a>", "application/xml"),
            (b"x=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E", "application/x-www-form-urlencoded"),
        ]
        events = [await stack.event(await stack.send(hook, b, t)) for b, t in bodies]
        page = session.page
        await session.login(owner, f"/webhooks/{hook['name']}/events")
        for event in events:
            for tab in ["pretty", "raw", "hex"]:
                await page.goto(f"/events/{event.id}?tab={tab}")
                await expect(page.get_by_role("tab", selected=True)).to_have_text(tab.title())
                await expect(page.get_by_role("tabpanel")).to_contain_text(
                    "onerror" if tab != "hex" else "69 6d 67"  # "img"
                )
                assert await page.locator("main img").count() == 0
        # session.problems (checked after the test) holds any alert() the page ran


class TestSession:
    async def test_an_expired_session_returns_to_the_same_page_after_login(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        page = session.page
        await session.login(owner, "/")
        await page.get_by_role("link", name="Webhooks").click()
        link = page.get_by_role("link", name=hook["name"], exact=True)
        await expect(link).to_be_visible()
        await SessionRepository(stack.db).delete_for_owner(owner.username)

        await link.click()

        await expect(page).to_have_url(re.compile(r"/login\?redirect="))
        await page.get_by_label("Username").fill(owner.username)
        await page.get_by_label("Password").fill(PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page).to_have_url(f"{stack.url}/webhooks/{hook['name']}/events")

    async def test_wrong_password_is_said_inline_and_nothing_is_in_web_storage(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        page = session.page
        await page.goto("/login")
        await page.get_by_label("Username").fill(owner.username)
        await page.get_by_label("Password").fill("wrong password")
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
        await session.login(owner)
        storage = await page.evaluate(
            "JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})"
        )
        csrf = await page.evaluate(
            "fetch('/api/v1/me').then(r => r.json()).then(m => m.csrf_token)"
        )
        cookies = [c for c in await session.context.cookies() if c["name"] == "hookbay_session"]
        assert [c["httpOnly"] for c in cookies] == [True]
        assert len(csrf) > 16
        assert csrf not in storage
        assert cookies[0]["value"] not in storage
        assert "hookbay_session" not in await page.evaluate("document.cookie")


class TestUnreachableApi:
    async def test_the_banner_says_so_when_the_api_goes_away(
        self, stack: Stack, session: Session, env: dict[str, str], tmp_path: Path
    ) -> None:
        """A dashboard process of this test's own, killed under the open page."""
        owner = await stack.owner()
        penv = {**env, "HOOKBAY_COOKIE_SECURE": "false", "HOOKBAY_KAFKA_NAMESPACE": "ui.gone"}
        async with service_process("dashboard", penv, tmp_path / "dashboard.log") as dashboard:
            page = session.page
            await page.goto(f"{dashboard.base}/login")
            await page.get_by_label("Username").fill(owner.username)
            await page.get_by_label("Password").fill(PASSWORD)
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            banner = page.get_by_role("alert").filter(has_text="API unreachable")
            await expect(banner).to_have_count(0)

            dashboard.kill()
            await dashboard.wait()
            await page.get_by_role("link", name="API tokens").click()

            await expect(banner).to_be_visible()


class TestLoginThrottling:
    async def test_429_says_when_to_try_again(
        self, stack: Stack, session: Session, env: dict[str, str], tmp_path: Path
    ) -> None:
        """A dashboard process of this test's own that allows 2 logins a minute per user."""
        owner = await stack.owner()
        penv = {
            **env, "HOOKBAY_COOKIE_SECURE": "false", "HOOKBAY_KAFKA_NAMESPACE": "ui.throttle",
            "HOOKBAY_LOGIN_LIMIT_PER_USER": "2",
            "HOOKBAY_REDIS_KEY_PREFIX": f"hookbay:ui-throttle:{owner.username}:",
        }  # fmt: skip
        async with service_process("dashboard", penv, tmp_path / "dashboard.log") as dashboard:
            page = session.page
            await page.goto(f"{dashboard.base}/login")
            await page.get_by_label("Username").fill(owner.username)
            await page.get_by_label("Password").fill("not the password")
            alert = page.get_by_role("alert")
            for _ in range(2):
                await page.get_by_role("button", name="Sign in").click()
                await expect(alert).to_have_text("Wrong username or password.")
                await page.get_by_label("Password").fill("still not the password")
            await page.get_by_role("button", name="Sign in").click()
            await expect(alert).to_have_text(
                re.compile(r"^Too many attempts: try again in \d+ s\.$")
            )

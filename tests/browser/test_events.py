"""An owner's way through the dashboard: log in, see the webhook, its events (live), a detail,
a reloaded deep link, copy as curl (run, byte for byte), replay, bulk replay."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path

from playwright.async_api import expect

from tests.browser.conftest import Session, Stack
from tests.support.receiver import Reply
from tests.support.waiting import until


class TestEventList:
    async def test_login_returns_to_the_deep_link_and_a_new_event_arrives_live(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        first = await stack.send(hook, b'{"order": 1}')
        await stack.event(first)
        page = session.page

        await session.login(owner, f"/webhooks/{hook['name']}/events")

        assert page.url == f"{stack.url}/webhooks/{hook['name']}/events"
        events = page.get_by_role("list", name=f"Events of {hook['name']}")
        await expect(events.get_by_role("link", name=re.compile(first))).to_be_visible()
        await expect(page.get_by_text("● Live")).to_be_visible()
        second = await stack.send(hook, b"a=1&b=2", "application/x-www-form-urlencoded")
        pill = page.get_by_role("button", name="1 new event: show")
        await expect(pill).to_be_visible()
        await expect(page.get_by_test_id("live-region")).to_contain_text(second)
        await expect(events.get_by_role("link", name=re.compile(second))).to_have_count(0)
        await pill.click()
        await expect(events.get_by_role("link", name=re.compile(second))).to_be_visible()
        await expect(events.get_by_role("link")).to_have_count(2)

    async def test_overview_links_to_the_list_and_a_detail_survives_a_reload(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        request_id = await stack.send(hook, b"<order><id>7</id></order>", "application/xml")
        event = await stack.event(request_id)
        page = session.page
        await session.login(owner)

        await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        await page.get_by_role("link", name=hook["name"], exact=True).click()
        await page.get_by_role("link", name=re.compile(request_id)).click()

        await expect(page).to_have_url(f"{stack.url}/events/{event.id}")
        await expect(page.get_by_role("heading", name=request_id)).to_be_visible()
        await page.reload()
        await expect(page.get_by_role("heading", name=request_id)).to_be_visible()
        await expect(
            page.get_by_role("definition").filter(has_text="application/xml")
        ).to_be_visible()
        await page.get_by_role("tab", name="Raw").click()
        await expect(page).to_have_url(re.compile(r"tab=raw"))
        await expect(page.get_by_test_id("raw-body")).to_have_text("<order><id>7</id></order>")


class TestCopyAsCurl:
    async def copied_curl_sends_the_same_bytes(
        self, stack: Stack, session: Session, body: bytes, content_type: str
    ) -> None:
        owner = await stack.owner()
        secret = "a-signing-secret-of-the-test"
        hook = await stack.webhook(owner, secret=secret)
        original = await stack.event(await stack.send(hook, body, content_type, secret=secret))
        page = session.page
        await session.login(owner, f"/events/{original.id}")

        await page.get_by_role("button", name="Copy as curl").click()
        await expect(page.get_by_role("button", name="Copied")).to_be_visible()
        command = await page.evaluate("navigator.clipboard.readText()")
        events_before = {original.request_id}
        run = await asyncio.create_subprocess_exec(
            "bash", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await run.communicate()

        assert run.returncode == 0, err.decode()
        again = await stack.event(re.findall(r"req_[A-Za-z0-9]+", out.decode())[0])
        assert again.request_id not in events_before
        assert again.body == original.body == body
        assert again.signature_valid is True
        assert again.content_type == content_type

    async def test_a_text_body(self, stack: Stack, session: Session) -> None:
        body = '{"quote": "it\'s $HOME `x` \\\\ \u00e9"}\n\n'.encode()
        await self.copied_curl_sends_the_same_bytes(stack, session, body, "application/json")

    async def test_a_binary_body(self, stack: Stack, session: Session) -> None:
        body = bytes(range(256)) + base64.b64decode("iVBORw0KGgo=") + b"\x00\xff"
        await self.copied_curl_sends_the_same_bytes(
            stack, session, body, "application/octet-stream"
        )


class TestReplay:
    async def test_replay_from_the_detail_shows_the_replay_attempt(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        url = stack.receiver.url(Reply(status=400, body=b"no thanks"))
        hook = await stack.webhook(owner, forward_url=url)
        event = await stack.event(await stack.send(hook, b'{"n": 1}'), status="failed")
        page = session.page
        await session.login(owner, f"/events/{event.id}")
        await expect(page.get_by_text("HTTP 400").first).to_be_visible()

        await page.get_by_role("button", name="Replay", exact=True).click()
        dialog = page.get_by_role("dialog", name="Replay this event?")
        await dialog.get_by_role("button", name="Replay").click()

        await expect(page.get_by_role("heading", name=re.compile("^Replay"))).to_be_visible()
        await expect(page.get_by_text("HTTP 200").first).to_be_visible()
        await expect(page.get_by_text("✓Success").first).to_be_visible()
        assert len(await stack.receiver.wait_for(url, 2)) == 2

    async def test_bulk_replay_counts_first_and_a_reload_resumes_the_job(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        url = stack.receiver.url(*[Reply(status=400)] * 3)
        hook = await stack.webhook(owner, forward_url=url)
        for n in range(3):
            await stack.event(await stack.send(hook, b'{"n": %d}' % n), status="failed")
        page = session.page
        await session.login(owner, f"/webhooks/{hook['name']}/events")

        await page.get_by_role("link", name="Replay failed").click()
        start = page.get_by_role("button", name="Replay 3 failed events")
        # the forward URL is the route ``forward_url``: its filter-less route is replayed
        await expect(
            page.get_by_text("will be delivered again to routes forward_url")
        ).to_be_visible()
        await start.click()

        await expect(page).to_have_url(re.compile(r"/replay\?job=rpj_"))
        await expect(page.get_by_text("Published 3 of 3")).to_be_visible()
        await page.reload()
        await expect(page.get_by_text("Done: 3 events queued for delivery again.")).to_be_visible()
        assert len(await stack.receiver.wait_for(url, 6)) == 6


class TestRowCopy:
    async def test_each_row_copies_its_request_id_without_opening_the_event(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        older, newer = [await stack.send(hook, b'{"n": %d}' % n) for n in range(2)]
        for request_id in (older, newer):
            await stack.event(request_id)
        page = session.page
        listed = f"{stack.url}/webhooks/{hook['name']}/events"
        await session.login(owner, f"/webhooks/{hook['name']}/events")

        async def clipboard() -> str:
            text: str = await page.evaluate("navigator.clipboard.readText()")
            return text

        await page.get_by_role("button", name=f"Copy request ID {older}").click()
        assert await clipboard() == older
        await expect(page.get_by_test_id("live-region")).to_have_text("Request ID copied")
        assert page.url == listed  # the row's link was not followed
        copy_newer = page.get_by_role("button", name=f"Copy request ID {newer}")
        await copy_newer.focus()
        await page.keyboard.press("Enter")
        assert await clipboard() == newer
        await page.get_by_role("button", name=f"Copy request ID {older}").focus()
        await page.keyboard.press("Space")
        assert await clipboard() == older
        assert page.url == listed
        # the `c` shortcut still copies the selected row's
        await page.keyboard.press("j")
        rows = page.get_by_role("list", name=f"Events of {hook['name']}").get_by_role("link")
        await expect(rows.filter(has_text=newer)).to_have_attribute("aria-current", "true")
        await page.keyboard.press("c")
        assert await clipboard() == newer


class TestOverviewPending:
    async def test_pending_events_are_counted_and_link_to_their_list(
        self, stack: Stack, session: Session
    ) -> None:
        gate = asyncio.Event()
        owner = await stack.owner()
        # each event's delivery waits at the gate (they run side by side, up to the forward
        # URL destination's max_concurrency)
        held = stack.receiver.url(Reply(gate=gate), Reply(gate=gate))
        hook = await stack.webhook(owner, forward_url=held)
        waiting = [await stack.send(hook, b'{"wait": %d}' % n) for n in range(2)]
        for request_id in waiting:
            await stack.event(request_id, status="pending")
        page = session.page
        await session.login(owner)
        card = page.get_by_role("listitem").filter(
            has=page.get_by_role("link", name=hook["name"], exact=True)
        )
        pending = card.get_by_role("link", name=re.compile(r"^\d+ events pending"))
        await expect(pending).to_have_accessible_name(
            f"2 events pending for {hook['name']} in the last 24 hours"
        )
        await pending.click()

        await expect(page).to_have_url(re.compile(r"status=pending.*since=|since=.*status=pending"))
        rows = page.get_by_role("list", name=f"Events of {hook['name']}").get_by_role("link")
        await expect(rows).to_have_count(2)
        await expect(rows.filter(has_text="Pending")).to_have_count(2)

        gate.set()
        for request_id in waiting:
            await stack.event(request_id, status="success")

        async def counted_settled() -> bool:  # page summaries follow the status within a second
            found = (await owner.api.get("/api/v1/overview")).json()["webhooks"]
            return [w["pending_24h"] for w in found if w["name"] == hook["name"]] == [0]

        await until(counted_settled, 30, interval=0.2, what="the overview counts none pending")
        await page.goto("/")
        await expect(pending).to_have_accessible_name(
            f"0 events pending for {hook['name']} in the last 24 hours"
        )


class TestLiveStatus:
    async def test_a_pending_row_turns_into_its_final_status_in_place(
        self, stack: Stack, session: Session
    ) -> None:
        gate = asyncio.Event()
        hook = await stack.webhook(
            owner := await stack.owner(), forward_url=stack.receiver.url(Reply(gate=gate))
        )
        request_id = await stack.send(hook, b'{"slow": true}')
        await stack.event(request_id, status="pending")
        page = session.page
        await session.login(owner, f"/webhooks/{hook['name']}/events")
        row = page.get_by_role("link", name=re.compile(request_id))
        await expect(row).to_contain_text("Pending")

        gate.set()

        await expect(row).to_contain_text("Success")
        assert page.url.endswith(f"/webhooks/{hook['name']}/events")  # no reload, no navigation


class TestExport:
    async def test_the_list_and_the_detail_export_as_json_downloads(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        ids = [await stack.send(hook, b'{"n": %d}' % n) for n in range(2)]
        events = [await stack.event(request_id) for request_id in ids]
        page = session.page
        await session.login(owner, f"/webhooks/{hook['name']}/events")

        async with page.expect_download() as listed:
            await page.get_by_role("link", name="Export JSON").click()
        exported = json.loads(Path(await (await listed.value).path()).read_text())
        await page.goto(f"/events/{events[0].id}")
        async with page.expect_download() as single:
            await page.get_by_role("link", name="Export JSON").click()
        download = await single.value
        detail = json.loads(Path(await download.path()).read_text())

        assert [e["request_id"] for e in exported] == ids  # oldest first
        assert download.suggested_filename == f"{events[0].id}.json"
        assert (detail["request_id"], detail["request_body"]) == (ids[0], '{"n": 0}')


class TestUrlState:
    async def test_tab_search_and_selection_survive_a_reload_and_a_new_tab(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        secret = "url-state-test-secret"
        hook = await stack.webhook(owner, secret=secret)
        good = await stack.send(hook, b'{"ok": 1}', secret=secret)
        bad = await stack.send(hook, b'{"ok": 0}', secret="wrong-secret", status=401)
        await stack.event(good)
        await stack.event(bad, status="failed")
        page = session.page
        await session.login(owner, f"/webhooks/{hook['name']}/events")
        rows = page.get_by_role("list", name=f"Events of {hook['name']}").get_by_role("link")
        await expect(rows).to_have_count(2)

        await page.get_by_role("tab", name="Failed").click()
        await expect(rows).to_have_count(1)
        await page.keyboard.press("j")
        await expect(page).to_have_url(
            re.compile(r"status=failed.*sel=evt_|sel=evt_.*status=failed")
        )
        copy = await session.context.new_page()
        await copy.goto(page.url)

        for shown in (page, copy):
            if shown is page:
                await page.reload()
            tab = shown.get_by_role("tab", name="Failed")
            await expect(tab).to_have_attribute("aria-selected", "true")
            listed = shown.get_by_role("list", name=f"Events of {hook['name']}")
            await expect(listed.get_by_role("link")).to_have_count(1)
            await expect(listed.get_by_role("link", name=re.compile(bad))).to_have_attribute(
                "aria-current", "true"
            )
        await page.get_by_role("searchbox", name="Request ID or text").fill(good)
        await page.get_by_role("button", name="Search").click()
        await expect(page).to_have_url(re.compile(f"q={good}"))


class TestSearch:
    async def test_text_in_a_body_or_header_finds_its_events(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        wanted = await stack.send(hook, b'{"customer": "Ada Lovelace"}')
        other = await stack.send(hook, b'{"customer": "Alan Turing"}')
        await stack.event(wanted)
        await stack.event(other)
        page = session.page
        await session.login(owner, f"/webhooks/{hook['name']}/events")
        rows = page.get_by_role("list", name=f"Events of {hook['name']}").get_by_role("link")
        await expect(rows).to_have_count(2)

        await page.get_by_label("Request ID or text").fill("ada lovelace")
        await page.get_by_role("button", name="Search").click()

        await expect(page).to_have_url(re.compile(r"q=ada"))
        await expect(rows).to_have_count(1)
        await expect(rows.first).to_contain_text(wanted)
        await page.reload()
        await expect(rows).to_have_count(1)


class TestFilters:
    async def test_tabs_count_and_the_date_range_filters_the_list(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        secret = "filters-test-secret"
        hook = await stack.webhook(owner, secret=secret)
        good = await stack.send(hook, b'{"ok": 1}', secret=secret)
        bad = await stack.send(hook, b'{"ok": 0}', secret="wrong-secret", status=401)
        await stack.event(good)
        await stack.event(bad, status="failed")
        page = session.page
        await session.login(owner, f"/webhooks/{hook['name']}/events")
        rows = page.get_by_role("list", name=f"Events of {hook['name']}").get_by_role("link")
        await expect(rows).to_have_count(2)
        await expect(page.get_by_role("tab", name="All (2)")).to_be_visible()
        await expect(page.get_by_role("tab", name="Success (1)")).to_be_visible()
        await expect(page.get_by_role("tab", name="Failed (1)")).to_be_visible()
        await expect(page.get_by_role("tab", name="Pending (0)")).to_be_visible()

        await page.get_by_label("From (local time)").fill("2099-01-01T00:00")

        await expect(page).to_have_url(re.compile(r"since=2099-01-01"))
        await expect(page.get_by_text("No events match.")).to_be_visible()
        await expect(page.get_by_role("tab", name="All (0)")).to_be_visible()
        await page.get_by_role("button", name="Clear filters").click()
        await expect(rows).to_have_count(2)
        await page.get_by_label("Until (local time)").fill("2000-01-01T00:00")
        await expect(page.get_by_text("No events match.")).to_be_visible()

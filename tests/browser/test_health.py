"""Destination health in the dashboard, against the real stack: the destination's breaker shown
on its page, with what it holds and its last errors once a real forwarder's breaker opened; the
issues page with acknowledge and resolve, another owner's issues never listed;
alert channels added, sent a real signed test notification (checked with the Standard Webhooks
signature), and deleted."""

from __future__ import annotations

import base64
import hashlib
import hmac

from playwright.async_api import expect

from hookbay_common.alerts.issues import IssueTracker
from hookbay_common.db.issues import IssueRepository
from hookbay_common.models import IssueType
from tests.browser.conftest import Session, Stack
from tests.browser.test_routing import destination, route, row
from tests.support.receiver import Reply
from tests.support.waiting import until

SECRET_BYTES = b"0123456789abcdef01234567"
SECRET = "whsec_" + base64.b64encode(SECRET_BYTES).decode()


class TestHealth:
    async def test_the_destination_page_shows_its_breaker(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        await destination(owner, "billing", stack.receiver.url(),
                          breaker={"consecutive": 5, "cooldown_s": 60})  # fmt: skip
        page = session.page
        await session.login(owner, "/destinations/billing")
        health = page.get_by_role("region", name="Health")
        await expect(health.get_by_test_id("breaker-state")).to_contain_text(
            "closed: deliveries go out"
        )
        await expect(health).to_contain_text("or 5 in a row")
        await expect(health).to_contain_text("after 1 min, doubling up to 30 min")
        await expect(health).to_contain_text("after 3 d open, or at once on 410 Gone")
        await expect(health.get_by_test_id("held-count")).to_have_text("0")
        await expect(health.get_by_test_id("oldest-held")).to_have_text("—")
        await expect(health).to_contain_text("No failed attempts.")

    async def test_what_it_holds_and_its_last_errors_after_the_breaker_opened(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        url = stack.receiver.url(then=Reply(503))
        await destination(owner, "down", url, max_concurrency=1, retry_schedule=["0"],
                          breaker={"consecutive": 2, "cooldown_s": 3600,
                                   "max_cooldown_s": 3600})  # fmt: skip
        await route(owner, hook["name"], "all", "down")

        async def routed() -> bool:  # until ingest knows the route, an event is not routed
            event = await stack.event(await stack.send(hook, b'{"n": 0}'))
            return event.routed

        await until(routed, 30, interval=0.2, what="an event routed to down")
        for n in range(1, 4):  # the second failure opens the breaker; two are held
            await stack.send(hook, f'{{"n": {n}}}'.encode())

        async def held() -> bool:
            figures = (await owner.api.get("/api/v1/destinations/down/health")).json()
            return bool(figures["held"] == 2 and len(figures["last_errors"]) == 2)

        await until(held, 60, interval=0.2, what="two held, two errors")
        failed = [r.header("x-hookbay-event-id") or "" for r in stack.receiver.received(url)]
        page = session.page
        await session.login(owner, "/destinations/down")
        health = page.get_by_role("region", name="Health")
        await expect(health.get_by_test_id("breaker-state")).to_contain_text("open")
        await expect(health.get_by_test_id("held-count")).to_have_text("2")
        await expect(health.get_by_test_id("oldest-held").locator("time")).to_be_visible()
        errors = health.get_by_test_id("last-error")
        await expect(errors).to_have_count(2)
        for error, event_id in zip([errors.nth(0), errors.nth(1)], failed[::-1], strict=True):
            await expect(error).to_contain_text("HTTP 503")
            await expect(error.get_by_role("link", name=event_id)).to_be_visible()
        await errors.nth(0).get_by_role("link", name=failed[1]).click()
        await expect(page).to_have_url(f"{stack.url}/events/{failed[1]}")


class TestIssues:
    async def test_an_issue_is_acknowledged_then_resolved_and_others_are_not_listed(
        self, stack: Stack, session: Session
    ) -> None:
        owner, other = await stack.owner(), await stack.owner()
        await destination(owner, "billing", stack.receiver.url())
        tracker = IssueTracker(IssueRepository(stack.db), None)
        await tracker.occurred(owner.username, IssueType.DELIVERY, destination="billing",
                               reason="breaker")  # fmt: skip
        await tracker.occurred(owner.username, IssueType.DELIVERY, destination="billing")
        await tracker.occurred(other.username, IssueType.DISABLED, destination="theirs",
                               reason="gone")  # fmt: skip

        page = session.page
        await session.login(owner, "/issues")
        issues = page.get_by_test_id("issue")
        await expect(issues).to_have_count(1)
        issue = issues.first
        await expect(issue).to_contain_text("Deliveries failing")
        await expect(issue).to_contain_text("its circuit breaker opened")
        await expect(row(page, "2")).to_have_count(1)  # counted twice
        await expect(page.get_by_text("theirs")).to_have_count(0)

        await issue.get_by_role("button", name="Acknowledge the issue about billing").click()
        await expect(page.get_by_text("No open issues.")).to_be_visible()
        await page.get_by_role("tab", name="acknowledged").click()
        await expect(issues).to_have_count(1)
        await issues.first.get_by_role("button", name="Resolve the issue about billing").click()
        await expect(page.get_by_text("No acknowledged issues.")).to_be_visible()
        await page.get_by_role("tab", name="resolved").click()
        await expect(issues).to_have_count(1)
        await expect(issues.first.get_by_role("button")).to_have_count(0)


class TestAlertChannels:
    async def test_a_signed_webhook_channel_is_added_tested_and_deleted(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        url = stack.receiver.url()
        page = session.page
        await session.login(owner, "/alert-channels")
        await expect(page.get_by_text("No alert channels yet")).to_be_visible()

        form = page.get_by_role("form", name="New alert channel")
        await form.get_by_label("Type").select_option("webhook")
        await form.get_by_label("URL").fill(url)
        await form.get_by_label("Signing secret").fill(SECRET)
        await form.get_by_role("button", name="Add channel").click()
        channel = page.get_by_test_id("alert-channel")
        await expect(channel).to_have_count(1)
        await expect(channel).to_contain_text("Signed webhook")
        await expect(page.get_by_text(SECRET)).to_have_count(0)  # write-only

        await channel.get_by_role("button", name=f"Send a test notification to {url}").click()
        await expect(channel).to_contain_text("Test notification sent")
        (sent,) = await stack.receiver.wait_for(url, 1)
        msg_id, timestamp = sent.header("webhook-id"), sent.header("webhook-timestamp")
        assert msg_id is not None
        assert timestamp is not None
        signed = f"{msg_id}.{timestamp}.".encode() + sent.body
        expected = base64.b64encode(hmac.new(SECRET_BYTES, signed, hashlib.sha256).digest())
        assert f"v1,{expected.decode()}" in (sent.header("webhook-signature") or "").split()

        await channel.get_by_role("button", name=f"Delete the channel to {url}").click()
        dialog = page.get_by_role("dialog", name=f"Delete the channel to {url}?")
        await dialog.get_by_role("button", name="Delete channel").click()
        await expect(page.get_by_text("No alert channels yet")).to_be_visible()

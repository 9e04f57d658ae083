"""Destination health in the dashboard, against the real stack: the destination's breaker shown
on its page; the issues page with acknowledge and resolve, another owner's issues never listed;
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
from tests.browser.test_routing import destination, row

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

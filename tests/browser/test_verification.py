"""Provider verification in the dashboard: set through a webhook's Verification section, then
enforced by ingest; a recorded verdict shown on the event's page."""

from __future__ import annotations

import hashlib
import hmac
import time

import httpx
from playwright.async_api import expect

from hookbay_dev.http import async_client
from tests.browser.conftest import Session, Stack
from tests.support.waiting import until

STRIPE_SECRET = "whsec_browser-stripe-secret"


def stripe_signature(secret: str, body: bytes) -> str:
    moment = int(time.time())
    digest = hmac.new(secret.encode(), f"{moment}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={moment},v1={digest}"


async def post(url: str, body: bytes, signature: str | None) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if signature is not None:
        headers["stripe-signature"] = signature
    async with async_client(timeout=30) as client:
        return await client.post(url, content=body, headers=headers)


class TestVerificationSettings:
    async def test_stripe_set_in_the_ui_is_enforced(self, stack: Stack, session: Session) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        page = session.page
        await session.login(owner, "/webhooks")

        row = page.get_by_role("listitem").filter(has_text=hook["name"])
        await row.get_by_role("button", name="Verification").click()
        form = page.get_by_role("form", name=f"Verification of {hook['name']}")
        await form.get_by_role("combobox", name="Type", exact=True).select_option("stripe")
        await expect(form.get_by_label("Public URL (the URL the sender signs)")).to_have_count(0)
        await form.get_by_label("Secret", exact=True).fill(STRIPE_SECRET)
        await form.get_by_label("Tolerance (seconds; empty: the preset's default)").fill("120")
        await form.get_by_role("button", name="Save verification").click()
        await expect(row.get_by_text("Verified: Stripe")).to_be_visible()

        read = (await owner.api.get(f"/api/v1/webhooks/{hook['name']}")).json()
        verification = read["verification"]
        assert (verification["type"], verification["mode"]) == ("stripe", "enforce")
        assert (verification["secret"], verification["tolerance_s"]) == ("********", 120)
        assert STRIPE_SECRET not in await page.content()

        body = b'{"id": "evt_ui"}'

        async def refused() -> bool:
            return (await post(hook["url"], body, None)).status_code == 401

        await until(refused, 10, interval=0.1, what="ingest enforces stripe")
        signed = await post(hook["url"], body, stripe_signature(STRIPE_SECRET, body))
        assert signed.status_code == 200, signed.text
        forged = await post(hook["url"], body, stripe_signature("whsec_not-it", body))
        assert (forged.status_code, forged.json()["reason"]) == (401, "bad_signature")


class TestVerificationVerdict:
    async def test_a_recorded_events_reason_is_shown(self, stack: Stack, session: Session) -> None:
        owner = await stack.owner()
        verification = {"type": "stripe", "secret": STRIPE_SECRET, "mode": "record"}
        hook = await stack.webhook(owner, verification=verification)
        body = b'{"id": "evt_recorded"}'
        answered: list[httpx.Response] = []

        async def accepted() -> bool:  # record mode: accepted once ingest knows the webhook
            answered.append(await post(hook["url"], body, stripe_signature("whsec_wrong", body)))
            return answered[-1].status_code == 200

        await until(accepted, 10, interval=0.1, what="ingest records the forged request")
        event = await stack.event(answered[-1].json()["requestId"])
        page = session.page
        await session.login(owner, f"/events/{event.id}")

        verdict = page.get_by_test_id("verification")
        await expect(verdict).to_contain_text("invalid (stripe)")
        await expect(verdict).to_contain_text("reason: bad signature")
        await expect(page.get_by_test_id("handshake")).to_have_count(0)

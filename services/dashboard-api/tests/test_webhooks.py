"""Every webhook operation of the dashboard API, and each one reaching a running ingest."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.settings import Settings
from hookbay_dashboard.settings import DashboardSettings
from hookbay_ingest.app import create_app as create_ingest
from tests.support.dashboard import Dashboard, Owner, serve_dashboard
from tests.support.ingest import ingest_settings
from tests.support.waiting import until


async def create(owner: Owner, name: str = "orders", **body: object) -> httpx.Response:
    return await owner.client.post("/api/v1/webhooks", json={"name": name, **body})


class TestCreate:
    async def test_created_with_its_receiving_url(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        response = await create(owner, forward_url="http://127.0.0.1:9/in", secret="s3cret-value")
        assert response.status_code == 201
        hook = response.json()
        assert hook["url"] == f"{dashboard.settings.public_url}/w/{owner.username}/orders"
        assert (hook["active"], hook["secret"], hook["generated_secret"]) == (
            True, "********", None,
        )  # fmt: skip
        assert hook["forward_url"] == "http://127.0.0.1:9/in"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", hook["created_at"])
        assert "s3cret-value" not in response.text

    async def test_a_body_that_cannot_be_parsed_is_a_named_400(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        response = await owner.client.post(
            "/api/v1/webhooks", content=b'{"name": "\xff"}',
            headers={"content-type": "application/json"},
        )  # fmt: skip
        assert response.status_code == 400
        assert response.json() == {
            "error": "Bad request", "message": "There was an error parsing the body",
        }  # fmt: skip

    async def test_a_generated_secret_is_shown_once(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        created = (await create(owner, generate_secret=True)).json()
        assert len(created["generated_secret"]) >= 32
        read = await owner.client.get("/api/v1/webhooks/orders")
        assert read.json()["secret"] == "********"
        assert created["generated_secret"] not in read.text
        stored = await dashboard.runtime.db.webhooks.find_one({"_id": created["id"]})
        assert stored is not None
        assert created["generated_secret"] not in str(stored)  # sealed at rest

    @pytest.mark.parametrize(
        ("body", "status", "fragment"),
        [
            ({"name": "Orders"}, 400, "invalid webhook name"),
            ({"name": "a--b"}, 400, "invalid webhook name"),
            ({"name": "x" * 65}, 422, "name"),
            ({"name": "ok", "forward_url": "ftp://example.com/x"}, 400, "http"),
            ({"name": "ok", "forward_url": "http://user:pw@example.com/"}, 400, "credentials"),
            ({"name": "ok", "secret": "short"}, 422, "secret"),
            ({"name": "ok", "secret": "long-enough", "generate_secret": True}, 422, "either"),
            ({"name": "ok", "colour": "red"}, 422, "colour"),
            ({}, 422, "name"),
        ],
    )
    async def test_refused_with_a_clear_message(
        self, dashboard: Dashboard, body: dict[str, object], status: int, fragment: str
    ) -> None:
        owner = await dashboard.owner()
        response = await owner.client.post("/api/v1/webhooks", json=body)
        assert response.status_code == status, response.text
        assert fragment in response.json()["message"]

    async def test_a_taken_name_is_409(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        assert (await create(owner)).status_code == 201
        again = await create(owner)
        assert again.status_code == 409
        assert again.json()["error"] == "Webhook already exists"

    async def test_private_destinations_are_refused_unless_allowed(
        self, dashboard_settings: DashboardSettings
    ) -> None:
        strict = dashboard_settings.model_copy(update={"allow_private_destinations": False})
        async with serve_dashboard(strict) as served:
            owner = await served.owner()
            for url in ("http://127.0.0.1:8080/x", "http://10.1.2.3/x", "http://169.254.169.254/"):
                response = await create(owner, forward_url=url)
                assert response.status_code == 400, url
                assert response.json()["error"] == "Destination not allowed"


class TestChange:
    async def test_read_list_and_each_change(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        await create(owner, "billing")
        names = [h["name"] for h in (await owner.client.get("/api/v1/webhooks")).json()]
        assert names == ["billing", "orders"]

        async def patch(**body: object) -> dict[str, object]:
            response = await owner.client.patch("/api/v1/webhooks/orders", json=body)
            assert response.status_code == 200, response.text
            return dict(response.json())

        assert (await patch(forward_url="http://127.0.0.1:9/new"))["forward_url"] == (
            "http://127.0.0.1:9/new"
        )
        assert (await patch(secret="first-secret"))["secret"] == "********"
        rotated = await patch(generate_secret=True)
        assert rotated["secret"] == "********"
        assert rotated["generated_secret"]
        removed = await patch(secret=None, forward_url=None)
        assert (removed["secret"], removed["forward_url"]) == (None, None)
        unchanged = await patch()
        assert unchanged["name"] == "orders"
        off = await owner.client.post("/api/v1/webhooks/orders/deactivate")
        assert off.json()["active"] is False
        on = await owner.client.post("/api/v1/webhooks/orders/activate")
        assert on.json()["active"] is True
        assert (await owner.client.delete("/api/v1/webhooks/orders")).status_code == 204
        assert (await owner.client.get("/api/v1/webhooks/orders")).status_code == 404
        assert (await owner.client.delete("/api/v1/webhooks/orders")).status_code == 404

    async def test_secrets_are_never_logged(
        self, dashboard: Dashboard, caplog: pytest.LogCaptureFixture
    ) -> None:
        owner = await dashboard.owner()
        with caplog.at_level(logging.DEBUG):
            await create(owner, secret="do-not-log-me-1")
            await owner.client.patch("/api/v1/webhooks/orders", json={"secret": "do-not-log-me-2"})
        assert "do-not-log-me" not in caplog.text


@dataclass
class Ingest:
    client: httpx.AsyncClient

    async def post(self, owner: Owner, name: str, secret: str | None = None) -> int:
        body = b'{"n": 1}'
        headers = {}
        if secret is not None:
            digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            headers["X-Service-Signature"] = digest
        response = await self.client.post(
            f"/w/{owner.username}/{name}", content=body, headers=headers
        )
        return response.status_code


@pytest.fixture(scope="module")
async def ingest(settings: Settings) -> AsyncIterator[Ingest]:
    """A real ingest app following the configuration change log."""
    await ensure_configured_topics(settings)
    app = create_ingest(ingest_settings(settings))
    async with app.router.lifespan_context(app):
        await app.state.ingest.kafka_connected.wait()
        await app.state.ingest.view.following.wait()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:
            yield Ingest(client)


class TestReachesIngest:
    """Each change reaches ingest through the change log (the dashboard publishes it after the
    MongoDB write); the waits below are deadlines, not the measured latency."""

    async def test_create_deactivate_secret_delete(
        self, dashboard: Dashboard, ingest: Ingest
    ) -> None:
        owner = await dashboard.owner()

        async def status_becomes(expected: int, secret: str | None = None) -> None:
            async def check() -> bool:
                return await ingest.post(owner, "live", secret) == expected

            await until(check, timeout=10, interval=0.1, what=f"ingest answers {expected}")

        await status_becomes(404)  # the user is known, the webhook not yet
        await create(owner, "live")
        await status_becomes(200)
        await owner.client.post("/api/v1/webhooks/live/deactivate")
        await status_becomes(403)
        await owner.client.post("/api/v1/webhooks/live/activate")
        await status_becomes(200)
        await owner.client.patch("/api/v1/webhooks/live", json={"secret": "signing-secret"})
        await status_becomes(401)
        assert await ingest.post(owner, "live", "signing-secret") == 200
        await owner.client.patch("/api/v1/webhooks/live", json={"secret": None})
        await status_becomes(200)
        await owner.client.delete("/api/v1/webhooks/live")
        await status_becomes(404)


def stripe_signature(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``Stripe-Signature`` header Stripe sends: ``t=<unix>,v1=<hex HMAC-SHA256 of
    "<t>.<body>" keyed with the whole secret>``."""
    moment = int(time.time()) if timestamp is None else timestamp
    signed = f"{moment}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"t={moment},v1={digest}"


STRIPE_SECRET = "whsec_first-stripe-secret"
STRIPE = {"type": "stripe", "secret": STRIPE_SECRET, "tolerance_s": 300}


class TestVerification:
    async def test_created_and_read_with_every_secret_masked(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        meta = {"type": "meta", "secret": "meta-app-secret", "verify_token": "meta-token"}
        created = await create(owner, verification=meta)
        assert created.status_code == 201, created.text
        read = (await owner.client.get("/api/v1/webhooks/orders")).json()
        assert read["secret"] is None
        assert read["verification"] == {
            "type": "meta", "mode": "enforce", "secret": "********", "previous": None,
            "tolerance_s": None, "public_url": None, "verify_token": "********",
            "public_key": None, "hmac": None, "basic": None, "api_key": None,
        }  # fmt: skip
        listed = await owner.client.get("/api/v1/webhooks")
        for text in (created.text, listed.text, str(read)):
            assert "meta-app-secret" not in text
            assert "meta-token" not in text
        stored = await dashboard.runtime.db.webhooks.find_one({"_id": read["id"]})
        assert "meta-app-secret" not in str(stored)  # sealed at rest

    async def test_basic_and_api_key_values_are_masked_public_fields_are_not(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        basic = {"type": "basic", "basic": {"username": "sender", "password": "basic-pass"}}
        assert (await create(owner, "b", verification=basic)).status_code == 201
        api_key = {"type": "api-key", "api_key": {"header": "X-Api-Key", "value": "key-value"}}
        assert (await create(owner, "k", verification=api_key)).status_code == 201
        grid = {"type": "sendgrid", "public_key": "MFkwEwYHKoZIzj0CAQY"}
        assert (await create(owner, "g", verification=grid)).status_code == 201
        twilio = {"type": "twilio", "secret": "twilio-token", "public_url": "https://x.test/w"}
        assert (await create(owner, "t", verification=twilio)).status_code == 201
        views = {
            h["name"]: h["verification"]
            for h in (await owner.client.get("/api/v1/webhooks")).json()
        }
        assert views["b"]["basic"] == {"username": "sender", "password": "********"}
        assert views["k"]["api_key"] == {"header": "x-api-key", "value": "********"}
        assert (views["g"]["public_key"], views["g"]["secret"]) == ("MFkwEwYHKoZIzj0CAQY", None)
        assert views["t"]["public_url"] == "https://x.test/w"
        assert "basic-pass" not in str(views)
        assert "key-value" not in str(views)

    async def test_patch_keeps_omitted_secrets_and_rotation_keeps_the_old_one(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        await create(owner, verification=STRIPE)

        async def patch(verification: object) -> dict[str, Any]:
            response = await owner.client.patch(
                "/api/v1/webhooks/orders", json={"verification": verification}
            )
            assert response.status_code == 200, response.text
            return dict(response.json()["verification"])

        async def stored() -> Any:
            return (await dashboard.runtime.webhooks.require(owner.username, "orders")).verification

        recorded = await patch({"type": "stripe", "mode": "record", "secret": "********"})
        assert (recorded["mode"], recorded["secret"], recorded["previous"]) == (
            "record", "********", None,
        )  # fmt: skip
        assert (await stored()).secret.get_secret_value() == STRIPE_SECRET

        before = datetime.now(UTC)
        rotated = await patch(
            {"type": "stripe", "secret": "whsec_second-secret", "keep_previous_for_s": 3600}
        )
        assert rotated["previous"]["secret"] == "********"
        expires = datetime.fromisoformat(rotated["previous"]["expires_at"])
        assert before + timedelta(seconds=3590) < expires < before + timedelta(seconds=3700)
        verification = await stored()
        assert verification.secret.get_secret_value() == "whsec_second-secret"
        assert verification.previous.secret.get_secret_value() == STRIPE_SECRET

        assert (rotated["mode"], rotated["tolerance_s"]) == ("record", 300)  # merged, kept

        at_once = await patch({"type": "stripe", "secret": "whsec_third-secret"})
        assert at_once["previous"] is None  # no keep_previous_for_s: replaced at once
        cleared = await patch({"type": "stripe", "tolerance_s": None, "mode": "enforce"})
        assert (cleared["tolerance_s"], cleared["mode"], cleared["secret"]) == (
            None, "enforce", "********",
        )  # fmt: skip
        no_secret = await owner.client.patch(
            "/api/v1/webhooks/orders", json={"verification": {"type": "stripe", "secret": None}}
        )
        assert no_secret.status_code == 422  # null clears, and stripe needs one
        assert "verification.secret" in no_secret.json()["message"]

        other_type = await owner.client.patch(
            "/api/v1/webhooks/orders", json={"verification": {"type": "github"}}
        )
        assert other_type.status_code == 422  # secrets never carry over to another type
        assert other_type.json()["detail"][0]["loc"] == ["body", "verification", "secret"]

    async def test_a_basic_password_rotates_like_a_secret(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        basic = {"type": "basic", "basic": {"username": "sender", "password": "first-pass"}}
        await create(owner, verification=basic)
        renamed = await owner.client.patch(
            "/api/v1/webhooks/orders",
            json={"verification": {"type": "basic", "basic": {"username": "other"}}},
        )
        assert renamed.json()["verification"]["previous"] is None  # password kept
        rotated = await owner.client.patch(
            "/api/v1/webhooks/orders",
            json={"verification": {"type": "basic", "keep_previous_for_s": 600,
                                   "basic": {"username": "other", "password": "second-pass"}}},
        )  # fmt: skip
        assert rotated.json()["verification"]["previous"]["secret"] == "********"
        hook = await dashboard.runtime.webhooks.require(owner.username, "orders")
        assert hook.verification is not None
        assert hook.verification.basic is not None
        assert hook.verification.basic.password.get_secret_value() == "second-pass"
        assert hook.verification.previous is not None
        assert hook.verification.previous.secret.get_secret_value() == "first-pass"

    async def test_null_removes_it_and_a_plain_secret_replaces_it(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        await create(owner, verification=STRIPE)
        plain = await owner.client.patch("/api/v1/webhooks/orders", json={"secret": "plain-secret"})
        assert (plain.json()["secret"], plain.json()["verification"]) == ("********", None)
        again = await owner.client.patch("/api/v1/webhooks/orders", json={"verification": STRIPE})
        assert (again.json()["secret"], again.json()["verification"]["type"]) == (None, "stripe")
        removed = await owner.client.patch("/api/v1/webhooks/orders", json={"verification": None})
        assert removed.status_code == 200
        assert (removed.json()["secret"], removed.json()["verification"]) == (None, None)
        hook = await dashboard.runtime.webhooks.require(owner.username, "orders")
        assert (hook.secret, hook.verification) == (None, None)

    async def test_a_plain_secret_rotates_into_hookbay_verification(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        await create(owner, secret="plain-secret")
        response = await owner.client.patch(
            "/api/v1/webhooks/orders",
            json={"verification": {"type": "hookbay", "secret": "new-secret",
                                   "keep_previous_for_s": 60}},
        )  # fmt: skip
        assert response.status_code == 200, response.text
        hook = await dashboard.runtime.webhooks.require(owner.username, "orders")
        assert hook.secret is None
        assert hook.verification is not None
        assert hook.verification.previous is not None
        assert hook.verification.previous.secret.get_secret_value() == "plain-secret"

    @pytest.mark.parametrize(
        ("verification", "field"),
        [
            ({"type": "stripe"}, "secret"),
            ({"type": "twilio", "secret": "twilio-token"}, "public_url"),
            ({"type": "square", "secret": "square-key"}, "public_url"),
            ({"type": "meta", "secret": "app-secret"}, "verify_token"),
            ({"type": "sendgrid"}, "public_key"),
            ({"type": "hmac", "secret": "hmac-secret"}, "hmac"),
            ({"type": "basic"}, "basic"),
            ({"type": "basic", "basic": {"username": "u"}}, "basic.password"),
            ({"type": "api-key"}, "api_key"),
            ({"type": "api-key", "api_key": {"header": "x-key"}}, "api_key.value"),
        ],
    )
    async def test_a_missing_field_is_a_422_naming_it(
        self, dashboard: Dashboard, verification: dict[str, Any], field: str
    ) -> None:
        owner = await dashboard.owner()
        response = await create(owner, verification=verification)
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["error"] == "Invalid request"
        assert f"verification.{field}" in body["message"]
        assert body["detail"][0]["loc"] == ["body", "verification", *field.split(".")]
        await create(owner, verification={"type": "none"})  # nothing to carry over
        patched = await owner.client.patch(
            "/api/v1/webhooks/orders", json={"verification": verification}
        )
        assert patched.status_code == 422
        assert f"verification.{field}" in patched.json()["message"]

    @pytest.mark.parametrize(
        ("body", "fragment"),
        [
            ({"verification": {"type": "acme", "secret": "s" * 10}}, "verification.type"),
            ({"verification": {**STRIPE, "colour": "red"}}, "verification.colour"),
            ({"verification": STRIPE, "secret": "plain-secret"}, "not both"),
            ({"verification": STRIPE, "generate_secret": True}, "not both"),
            ({"verification": {**STRIPE, "secret": " padded "}}, "verification.secret"),
            ({"verification": {**STRIPE, "tolerance_s": -1}}, "verification.tolerance_s"),
            ({"verification": {**STRIPE, "mode": "maybe"}}, "verification.mode"),
            ({"verification": {"type": "sendgrid", "public_key": "MFkw", "secret": "s" * 10}},
             "verification.secret: secret is not used by verification type sendgrid"),
            (
                {"verification": {"type": "hmac", "secret": "s" * 10,
                                  "hmac": {"header": "x-sig", "payload": "{nope}"}}},
                "verification.hmac",
            ),
        ],
    )  # fmt: skip
    async def test_refused_with_a_422(
        self, dashboard: Dashboard, body: dict[str, Any], fragment: str
    ) -> None:
        owner = await dashboard.owner()
        response = await create(owner, **body)
        assert response.status_code == 422, response.text
        assert fragment in response.json()["message"]
        assert (await owner.client.get("/api/v1/webhooks/orders")).status_code == 404

    async def test_another_owners_webhook_is_404(self, dashboard: Dashboard) -> None:
        victim = await dashboard.owner()
        await create(victim, verification=STRIPE)
        intruder = await dashboard.owner()
        path = "/api/v1/webhooks/orders"
        assert (await intruder.client.get(path)).status_code == 404
        for verification in (STRIPE, None, {"type": "none"}):
            response = await intruder.client.patch(path, json={"verification": verification})
            assert response.status_code == 404
        hook = await dashboard.runtime.webhooks.require(victim.username, "orders")
        assert hook.verification is not None
        assert hook.verification.secret is not None
        assert hook.verification.secret.get_secret_value() == STRIPE_SECRET


class TestVerificationReachesIngest:
    async def test_stripe_set_through_the_api_is_enforced(
        self, dashboard: Dashboard, ingest: Ingest
    ) -> None:
        owner = await dashboard.owner()
        body = b'{"id": "evt_1", "type": "charge.succeeded"}'
        path = f"/w/{owner.username}/stripe"

        async def send(signature: str | None) -> httpx.Response:
            headers = {"content-type": "application/json"}
            if signature is not None:
                headers["stripe-signature"] = signature
            return await ingest.client.post(path, content=body, headers=headers)

        created = await create(owner, "stripe", verification=STRIPE)
        assert created.status_code == 201, created.text

        async def enforced() -> bool:
            return (await send(None)).status_code == 401

        await until(enforced, timeout=10, interval=0.1, what="ingest enforces stripe")
        assert (await send(stripe_signature(STRIPE_SECRET, body))).status_code == 200
        forged = await send(stripe_signature("whsec_someone-else", body))
        assert forged.status_code == 401
        assert forged.json()["reason"] == "bad_signature"
        assert (await send(None)).json()["reason"] == "missing_signature"
        stale = await send(stripe_signature(STRIPE_SECRET, body, int(time.time()) - 3600))
        assert (stale.status_code, stale.json()["reason"]) == (401, "timestamp_out_of_tolerance")

        await owner.client.patch(
            "/api/v1/webhooks/stripe",
            json={"verification": {"type": "stripe", "secret": "whsec_rotated",
                                   "keep_previous_for_s": 600}},
        )  # fmt: skip

        async def rotated() -> bool:
            signed = stripe_signature("whsec_rotated", body)
            return (await send(signed)).status_code == 200

        await until(rotated, timeout=10, interval=0.1, what="ingest takes the new secret")
        assert (await send(stripe_signature(STRIPE_SECRET, body))).status_code == 200

        await owner.client.patch("/api/v1/webhooks/stripe", json={"verification": None})

        async def open_again() -> bool:
            return (await send(None)).status_code == 200

        await until(open_again, timeout=10, interval=0.1, what="ingest drops the verification")

"""Every webhook operation of the dashboard API, and each one reaching a running ingest."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

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

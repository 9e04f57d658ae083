"""The receiving endpoint, rule by rule (docs/owners/receiving.md), against real services."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Callable

import pytest

from hookbay_common.ids import IdPrefix, has_prefix
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.models import EventStatus, RejectedReason
from hookbay_common.settings import Settings
from hookbay_dev.http import async_client
from tests.support.factories import create_webhook
from tests.support.ingest import Probe, Stack, ingest_process

LIMIT = 4_500_000
BODIES = {
    "json": ("application/json", b'{"order": 1, "name": "caf\xc3\xa9"}'),
    "xml": ("application/xml", b"<?xml version='1.0'?><order id='1'/>"),
    "form": ("application/x-www-form-urlencoded", b"a=1&b=%20x&c="),
    "text": ("text/plain", b"plain text\r\nline two\n"),
    "binary": ("application/octet-stream", bytes(range(256)) * 8),
    "invalid-utf8": ("application/octet-stream", b"\xff\xfe\x00\xc3("),
}


def sign(body: bytes, secret: str) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class TestAccepted:
    async def test_200_body_and_captured_event(self, stack: Stack, probe: Probe) -> None:
        user, hook = await stack.owner()
        headers = [
            ("Content-Type", "application/json"),
            ("X-Dup", "a"),
            ("X-Dup", "b"),
            ("X.Dot", "1"),
        ]
        response = await stack.post(user, hook, b'{"a":1}', headers=headers)
        assert response.status_code == 200
        body = response.json()
        assert list(body) == ["success", "requestId"]
        assert body["success"] is True
        assert has_prefix(body["requestId"], IdPrefix.REQUEST)
        (event,) = await probe.events(body["requestId"])
        assert has_prefix(event.id, IdPrefix.EVENT)
        assert (event.username, event.webhook_name, event.webhook_id) == (
            user.username,
            hook.name,
            hook.id,
        )
        assert event.body == b'{"a":1}'
        assert event.request_headers["x-dup"] == "a, b"
        assert event.request_headers["x.dot"] == "1"
        assert event.request_headers["content-type"] == "application/json"
        assert all(name == name.lower() for name in event.request_headers)
        assert event.content_type == "application/json"
        assert event.client_ip == "198.51.100.7"
        assert event.signature_valid is None
        assert event.status is EventStatus.PENDING
        assert abs(event.created_at.timestamp() - time.time()) < 60

    @pytest.mark.parametrize("kind", sorted(BODIES))
    async def test_body_types_round_trip_byte_exact(
        self, stack: Stack, probe: Probe, kind: str
    ) -> None:
        user, hook = await stack.owner()
        content_type, payload = BODIES[kind]
        response = await stack.post(user, hook, payload, headers={"Content-Type": content_type})
        assert response.status_code == 200
        (event,) = await probe.events(response.json()["requestId"])
        assert event.body == payload
        assert event.content_type == content_type

    async def test_content_type_not_required(self, stack: Stack, probe: Probe) -> None:
        user, hook = await stack.owner()
        response = await stack.client.post(
            f"/w/{user.username}/{hook.name}", content=b"x", headers={"content-type": ""}
        )
        assert response.status_code == 200

    async def test_request_ids_unique(self, stack: Stack) -> None:
        user, hook = await stack.owner()
        responses = await asyncio.gather(*(stack.post(user, hook) for _ in range(20)))
        assert len({r.json()["requestId"] for r in responses}) == 20


class TestRejected:
    @pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    async def test_405_for_other_methods(self, stack: Stack, method: str) -> None:
        user, hook = await stack.owner()
        response = await stack.client.request(method, f"/w/{user.username}/{hook.name}")
        assert response.status_code == 405
        assert response.headers["allow"] == "POST"
        if method != "HEAD":
            assert response.json()["error"] == "Method not allowed"

    @pytest.mark.parametrize(
        ("path", "field"),
        [("/w/Bad_User/orders", "username"), ("/w/alice/Bad--Name", "webhookName")],
    )
    async def test_400_for_names_that_break_the_grammar(
        self, stack: Stack, path: str, field: str
    ) -> None:
        response = await stack.client.post(path, content=b"{}")
        assert response.status_code == 400
        assert response.json()["error"] == "Invalid request"
        assert field in response.json()

    async def test_403_unknown_user(self, stack: Stack) -> None:
        response = await stack.client.post("/w/nobody-at-all/orders", content=b"{}")
        assert response.status_code == 403
        assert response.json() == {
            "error": "User not found", "message": "no user named 'nobody-at-all'", "username": "nobody-at-all",
        }  # fmt: skip

    async def test_404_unknown_webhook(self, stack: Stack) -> None:
        user, _ = await stack.owner()
        response = await stack.client.post(f"/w/{user.username}/missing", content=b"{}")
        assert response.status_code == 404
        body = response.json()
        assert body["error"] == "Webhook not found"
        assert (body["username"], body["webhookName"]) == (user.username, "missing")

    async def test_403_inactive_then_active_again(self, stack: Stack) -> None:
        user, hook = await stack.owner()
        await stack.webhooks.update(user.username, hook.name, active=False)
        await stack.ingest.view.reconcile()
        response = await stack.post(user, hook)
        assert response.status_code == 403
        assert response.json() == {
            "error": "Webhook is not active",
            "message": "This webhook has been deactivated",
        }
        await stack.webhooks.update(user.username, hook.name, active=True)
        await stack.ingest.view.reconcile()
        assert (await stack.post(user, hook)).status_code == 200


class TestSize:
    async def test_exactly_the_limit_is_accepted(self, stack: Stack, probe: Probe) -> None:
        user, hook = await stack.owner()
        payload = bytes(range(256)) * (LIMIT // 256) + b"x" * (LIMIT % 256)
        assert len(payload) == LIMIT
        response = await stack.post(user, hook, payload)
        assert response.status_code == 200
        (event,) = await probe.events(response.json()["requestId"])
        assert event.body == payload

    async def test_one_byte_over_is_413(self, stack: Stack) -> None:
        user, hook = await stack.owner()
        response = await stack.post(user, hook, b"x" * (LIMIT + 1))
        assert response.status_code == 413
        assert response.json() == {
            "error": "Payload too large",
            "message": "the body exceeds the 4.5 MB limit; shrink it or split it",
            "limit": "4.5 MB",
            "received": "4.500001 MB",
        }

    async def test_chunked_oversize_is_counted_and_cut(self, stack: Stack) -> None:
        user, hook = await stack.owner()

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(6):
                yield b"y" * 1_000_000

        response = await stack.client.post(f"/w/{user.username}/{hook.name}", content=chunks())
        assert response.status_code == 413
        assert response.json()["received"] == "more than 4.5 MB"


class TestSignature:
    SECRET = "topsecret-key-1"

    @pytest.mark.parametrize(
        "shape",
        [
            lambda s: s,
            lambda s: f"sha256={s}",
            lambda s: s.upper(),
            lambda s: f"  SHA256={s.upper()} \t",
        ],
        ids=["plain", "prefixed", "upper", "spaced-prefixed-upper"],
    )
    async def test_valid_variants(
        self, stack: Stack, probe: Probe, shape: Callable[[str], str]
    ) -> None:
        user, hook = await stack.owner(secret=self.SECRET)
        body = b'{"signed": true}'
        response = await stack.post(
            user, hook, body, headers={"X-Service-Signature": shape(sign(body, self.SECRET))}
        )
        assert response.status_code == 200
        (event,) = await probe.events(response.json()["requestId"])
        assert event.signature_valid is True

    @pytest.mark.parametrize(
        "signature", ["deadbeef", "sha256=" + "0" * 64, "not hex at all", None]
    )
    async def test_invalid_or_missing_is_401_and_recorded(
        self, stack: Stack, probe: Probe, signature: str | None
    ) -> None:
        user, hook = await stack.owner(secret=self.SECRET)
        headers = {"X-Service-Signature": signature} if signature is not None else {}
        response = await stack.post(user, hook, b"{}", headers=headers)
        assert response.status_code == 401
        body = response.json()
        assert (body["error"], body["message"]) == (
            "Invalid signature",
            "Signature verification failed",
        )
        (event,) = await probe.events(body["requestId"])
        assert event.signature_valid is False
        assert event.status is EventStatus.FAILED
        assert event.rejected_reason is RejectedReason.INVALID_SIGNATURE

    async def test_signed_with_another_secret(self, stack: Stack) -> None:
        user, hook = await stack.owner(secret=self.SECRET)
        response = await stack.post(
            user, hook, b"{}", headers={"X-Service-Signature": sign(b"{}", "other-secret")}
        )
        assert response.status_code == 401


class TestRateLimit:
    async def test_free_plan_429_after_ten(self, stack: Stack) -> None:
        user, hook = await stack.owner(plan="free")
        statuses = [(await stack.post(user, hook)).status_code for _ in range(10)]
        assert statuses == [200] * 10
        response = await stack.post(user, hook)
        assert response.status_code == 429
        body = response.json()
        assert (body["error"], body["limit"], body["plan"]) == (
            "Rate limit exceeded",
            "10 requests per minute",
            "free",
        )
        assert isinstance(body["retryAfter"], int)
        assert body["retryAfter"] >= 1
        assert response.headers["retry-after"] == str(body["retryAfter"])

    async def test_counted_per_owner_across_webhooks(self, stack: Stack) -> None:
        user, first = await stack.owner(plan="free")
        second = await stack.webhooks.create(create_webhook(username=user.username))
        await stack.ingest.view.reconcile()
        for i in range(10):
            assert (await stack.post(user, first if i % 2 else second)).status_code == 200
        assert (await stack.post(user, second)).status_code == 429
        other, other_hook = await stack.owner(plan="free")
        assert (await stack.post(other, other_hook)).status_code == 200

    async def test_over_rate_and_size_gets_429(self, stack: Stack) -> None:
        user, hook = await stack.owner(plan="free")
        for _ in range(10):
            await stack.post(user, hook)
        assert (await stack.post(user, hook, b"z" * (LIMIT + 1))).status_code == 429


class TestOperations:
    async def test_health_ready_metrics(self, stack: Stack) -> None:
        assert (await stack.client.get("/healthz")).json() == {"status": "ok"}
        ready = await stack.client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"ready": True, "kafka": True, "config_view": True, "redis": True}
        user, hook = await stack.owner()
        await stack.post(user, hook)
        text = (await stack.client.get("/metrics")).text
        for metric in (
            'hookbay_ingest_requests_total{code="200"}',
            "hookbay_ingest_request_duration_seconds_bucket",
            "hookbay_ingest_produce_duration_seconds_bucket",
            "hookbay_ingest_body_bytes_bucket",
            "hookbay_ingest_rate_limited_total",
        ):
            assert metric in text

    async def test_metrics_answers_get_and_refuses_other_methods(self, stack: Stack) -> None:
        """``/metrics`` itself, not a redirect to ``/metrics/``; another method gets the
        documented JSON 405 with Allow."""
        assert (await stack.client.get("/metrics")).status_code == 200
        posted = await stack.client.post("/metrics", content=b"x")
        assert posted.status_code == 405
        assert set(posted.headers["allow"].split(", ")) == {"GET", "HEAD"}
        assert posted.json()["error"]
        old = await stack.client.get("/metrics/")  # the path the mount it replaced served
        assert (old.status_code, old.headers["location"]) == (307, "http://ingest/metrics")


class TestReplicas:
    async def test_two_ingest_processes_share_one_limit_through_redis(
        self, stack: Stack, env: dict[str, str]
    ) -> None:
        """This process's ingest and a second ``python -m hookbay_ingest`` on the same Redis."""
        user, hook = await stack.owner(plan="free")
        async with ingest_process(env) as (_, base), async_client(base_url=base) as remote:
            url = f"/w/{user.username}/{hook.name}"
            statuses = []
            for i in range(12):
                client = stack.client if i % 2 else remote
                statuses.append((await client.post(url, content=b"{}")).status_code)
        assert statuses[:10] == [200] * 10
        assert statuses[10:] == [429, 429]

    async def test_installations_sharing_a_redis_keep_their_limits_apart(
        self, stack: Stack, env: dict[str, str], settings: Settings
    ) -> None:
        """A second installation (another namespace) on the same Redis and store: an owner's
        limit spent in this one leaves the same owner name's limit there whole."""
        user, hook = await stack.owner(plan="free")
        url = f"/w/{user.username}/{hook.name}"
        statuses = [(await stack.client.post(url, content=b"{}")).status_code for _ in range(11)]
        assert statuses == [200] * 10 + [429]
        namespace = f"{settings.kafka_namespace}.other"
        await ensure_configured_topics(settings.model_copy(update={"kafka_namespace": namespace}))
        other = {**env, "HOOKBAY_KAFKA_NAMESPACE": namespace}
        async with ingest_process(other) as (_, base), async_client(base_url=base) as remote:
            assert (await remote.post(url, content=b"{}")).status_code == 200
        assert (await stack.client.post(url, content=b"{}")).status_code == 429


class TestUnexpectedErrors:
    async def test_500_without_internals(
        self, stack: Stack, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        user, hook = await stack.owner()

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("secret internal detail /etc/passwd")

        monkeypatch.setattr(stack.ingest.pipeline, "_capture", broken)
        response = await stack.post(user, hook)
        assert response.status_code == 500
        body = response.json()
        assert body["error"] == "Internal server error"
        assert has_prefix(body["requestId"], IdPrefix.REQUEST)
        assert "secret internal detail" not in response.text
        assert "Traceback" not in response.text

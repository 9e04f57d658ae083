"""Text the store cannot hold (a NUL, an unpaired surrogate), in every kind of parameter that
reaches it, against the real FerretDB: 400 in the documented shape, never a 500."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from tests.support.dashboard import PASSWORD, Dashboard

NUL = "ab\x00c"
SURROGATE = "ab\ud800c"
ASTRAL_NUL = "\U0001f600\U00096809\x00"
"""The shape schemathesis found: astral characters and a NUL."""

# (method, path with {bad} where the value goes or None, JSON body with "{bad}" or None, where)
PATH_AND_QUERY = [
    ("DELETE", "/tokens/{bad}", None, "path parameter token_id"),
    ("PATCH", "/admin/users/{bad}", {"plan": "pro"}, "path parameter username"),
    ("GET", "/webhooks/{bad}", None, "path parameter name"),
    ("DELETE", "/webhooks/{bad}", None, "path parameter name"),
    ("POST", "/webhooks/{bad}/activate", None, "path parameter name"),
    ("GET", "/webhooks/{bad}/events", None, "path parameter name"),
    ("GET", "/webhooks/hook/events?cursor={bad}", None, "query parameter cursor"),
    ("GET", "/webhooks/hook/events?request_id={bad}", None, "query parameter request_id"),
    ("GET", "/webhooks/hook/events?status={bad}", None, "query parameter status"),
    ("GET", "/webhooks/hook/events/export?status={bad}", None, "query parameter status"),
    ("GET", "/events/{bad}", None, "path parameter event_id"),
    ("GET", "/events/{bad}/export", None, "path parameter event_id"),
    ("POST", "/events/{bad}/replay", None, "path parameter event_id"),
    ("POST", "/webhooks/{bad}/events/replay", None, "path parameter name"),
    ("GET", "/webhooks/hook/replays/{bad}", None, "path parameter job_id"),
]
BODIES = [
    ("POST", "/auth/login", {"username": "{bad}", "password": PASSWORD}, "body.username"),
    ("POST", "/auth/login", {"username": "someone", "password": "{bad}"}, "body.password"),
    ("POST", "/tokens", {"name": "{bad}"}, "body.name"),
    ("POST", "/admin/users", {"username": "{bad}"}, "body.username"),
    ("PATCH", "/admin/users/someone", {"password": "{bad}1234567890"}, "body.password"),
    ("POST", "/webhooks", {"name": "{bad}"}, "body.name"),
    ("POST", "/webhooks", {"name": "hook", "forward_url": "http://x/{bad}"}, "body.forward_url"),
    ("POST", "/webhooks", {"name": "hook", "secret": "{bad}12345678"}, "body.secret"),
    ("PATCH", "/webhooks/hook", {"secret": "{bad}12345678"}, "body.secret"),
]


def fill(template: object, bad: str) -> object:
    if isinstance(template, str):
        return template.replace("{bad}", bad)
    if isinstance(template, dict):
        return {key: fill(value, bad) for key, value in template.items()}
    return template


def assert_refused(status: int, body: dict[str, object], where: str) -> None:
    assert status == 400, body
    assert body["error"] == "Invalid request"
    assert body["parameter"] == where
    assert isinstance(body["message"], str)
    assert body["message"].startswith(f"{where} holds ")


class TestUnstorableText:
    @pytest.mark.parametrize("bad", [NUL, ASTRAL_NUL], ids=["nul", "astral-nul"])
    @pytest.mark.parametrize(
        ("method", "path", "body", "where"), PATH_AND_QUERY, ids=[p[1] for p in PATH_AND_QUERY]
    )
    async def test_in_a_path_or_query(
        self,
        dashboard: Dashboard,
        bad: str,
        method: str,
        path: str,
        body: dict[str, object] | None,
        where: str,
    ) -> None:
        """Only a NUL can come through a URL: percent-decoding never makes a surrogate."""
        admin = await dashboard.owner(admin=True)
        url = "/api/v1" + path.replace("{bad}", quote(bad, safe=""))
        response = await admin.client.request(method, url, json=body)
        assert_refused(response.status_code, response.json(), where)

    @pytest.mark.parametrize(
        "bad", [NUL, SURROGATE, ASTRAL_NUL], ids=["nul", "surrogate", "astral-nul"]
    )
    @pytest.mark.parametrize(
        ("method", "path", "body", "where"), BODIES, ids=[f"{b[1]}:{b[3]}" for b in BODIES]
    )
    async def test_in_a_json_body(
        self,
        dashboard: Dashboard,
        bad: str,
        method: str,
        path: str,
        body: dict[str, object],
        where: str,
    ) -> None:
        admin = await dashboard.owner(admin=True)
        content = json.dumps(fill(body, bad)).encode()  # ASCII: "\\u0000", "\\ud800"
        response = await admin.client.request(
            method, "/api/v1" + path, content=content, headers={"content-type": "application/json"}
        )
        assert_refused(response.status_code, response.json(), where)

    async def test_in_a_json_key(self, dashboard: Dashboard) -> None:
        admin = await dashboard.owner(admin=True)
        response = await admin.client.post("/api/v1/tokens", json={"name": "t", "k\x00": 1})
        assert_refused(response.status_code, response.json(), "a key of body")

    async def test_astral_characters_alone_are_ordinary_text(self, dashboard: Dashboard) -> None:
        """Storable: they get the answer any other wrong value gets."""
        owner = await dashboard.owner()
        async with dashboard.client() as client:
            login = await client.post(
                "/api/v1/auth/login", json={"username": "\U0001f600", "password": "\U00096809"}
            )
        assert login.status_code == 401
        token = await owner.client.post("/api/v1/tokens", json={"name": "ci \U0001f600"})
        assert token.status_code == 201
        listed = await owner.client.get("/api/v1/tokens")
        assert "ci \U0001f600" in [t["name"] for t in listed.json()]
        event = await owner.client.get("/api/v1/events/" + quote("evt_\U0001f600"))
        assert event.status_code == 404

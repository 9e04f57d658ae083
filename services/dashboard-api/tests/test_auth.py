"""Login, logout, sessions (expiry, CSRF), API tokens and throttling, on the real stack."""

from __future__ import annotations

from hookbay_dashboard.deps import SESSION_COOKIE
from tests.support.dashboard import PASSWORD, Dashboard


class TestLogin:
    async def test_sets_a_strict_httponly_cookie_and_me_answers(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        async with dashboard.client() as client:
            response = await client.post(
                "/api/v1/auth/login", json={"username": owner.username, "password": PASSWORD}
            )
            assert response.status_code == 200
            cookie = response.headers["set-cookie"]
            assert cookie.startswith(f"{SESSION_COOKIE}=")
            assert "HttpOnly" in cookie
            assert "SameSite=strict" in cookie
            body = response.json()
            assert body["username"] == owner.username
            assert body["csrf_token"]
            me = await client.get("/api/v1/me")
            assert me.status_code == 200
            assert me.json()["csrf_token"] == body["csrf_token"]

    async def test_wrong_password_and_unknown_user_look_alike(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        async with dashboard.client() as client:
            wrong = await client.post(
                "/api/v1/auth/login", json={"username": owner.username, "password": "nope-nope"}
            )
            unknown = await client.post(
                "/api/v1/auth/login", json={"username": "nobody-here", "password": "nope-nope"}
            )
        assert wrong.status_code == unknown.status_code == 401
        assert wrong.json() == unknown.json()
        assert wrong.json()["error"] == "Invalid credentials"

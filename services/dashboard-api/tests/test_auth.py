"""Login, logout, sessions (expiry, CSRF), API tokens and throttling, on the real stack."""

from __future__ import annotations

from datetime import timedelta

from hookbay_common.clock import utcnow
from hookbay_dashboard.accounts.service import AccountService
from hookbay_dashboard.auth.service import session_id
from hookbay_dashboard.deps import SESSION_COOKIE
from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import PASSWORD, Dashboard, serve_dashboard
from tests.support.factories import unique_name


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

    async def test_a_user_without_password_cannot_log_in(self, dashboard: Dashboard) -> None:
        rt = dashboard.runtime
        accounts = AccountService(rt.users, rt.tokens, rt.plans)
        user, _ = await accounts.create_user(unique_name("u"))  # token only, as the CLI does
        async with dashboard.client() as client:
            response = await client.post(
                "/api/v1/auth/login", json={"username": user.username, "password": PASSWORD}
            )
        assert response.status_code == 401

    async def test_a_body_off_the_schema_is_422_with_a_message(self, dashboard: Dashboard) -> None:
        async with dashboard.client() as client:
            response = await client.post("/api/v1/auth/login", json={"username": "x"})
            not_json = await client.post("/api/v1/auth/login", content=b"username=x&password=y")
        assert response.status_code == 422
        assert response.json()["error"] == "Invalid request"
        assert "password" in response.json()["message"]
        assert not_json.status_code == 422


class TestSession:
    async def test_logout_ends_the_session_everywhere(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        client, csrf = await owner.login()
        cookie = client.cookies[SESSION_COOKIE]
        response = await client.post("/api/v1/auth/logout", headers={"X-CSRF-Token": csrf})
        assert response.status_code == 204
        assert SESSION_COOKIE not in client.cookies
        async with dashboard.client(cookies={SESSION_COOKIE: cookie}) as replay:
            me = await replay.get("/api/v1/me")
        assert me.status_code == 401
        assert me.json()["error"] == "Not authenticated"

    async def test_an_expired_session_is_refused(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        client, _ = await owner.login()
        assert (await client.get("/api/v1/me")).status_code == 200
        sid = session_id(client.cookies[SESSION_COOKIE])
        await dashboard.runtime.db.sessions.update_one(
            {"_id": sid}, {"$set": {"expires_at": utcnow() - timedelta(seconds=1)}}
        )
        response = await client.get("/api/v1/me")
        assert response.status_code == 401
        assert "expired" in response.json()["message"]
        assert await dashboard.runtime.db.sessions.find_one({"_id": sid}) is None

    async def test_the_cookie_lasts_the_session_ttl(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        async with dashboard.client() as client:
            response = await client.post(
                "/api/v1/auth/login", json={"username": owner.username, "password": PASSWORD}
            )
        assert f"Max-Age={int(dashboard.settings.session_ttl)}" in response.headers["set-cookie"]
        stored = await dashboard.runtime.db.sessions.find_one({"username": owner.username})
        assert stored is not None
        session = client.cookies.get(SESSION_COOKIE)
        assert session is not None
        assert session not in str(stored)  # only the hash is kept

    async def test_state_changes_with_the_cookie_need_the_csrf_header(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        client, csrf = await owner.login()
        missing = await client.post("/api/v1/tokens", json={"name": "x"})
        wrong = await client.post(
            "/api/v1/tokens", json={"name": "x"}, headers={"X-CSRF-Token": csrf + "x"}
        )
        right = await client.post(
            "/api/v1/tokens", json={"name": "x"}, headers={"X-CSRF-Token": csrf}
        )
        assert (missing.status_code, wrong.status_code, right.status_code) == (403, 403, 201)
        assert missing.json()["error"] == "CSRF check failed"
        assert (await client.get("/api/v1/tokens")).status_code == 200  # reads need none
        # an API token is not a browser credential: no CSRF header needed
        assert (await owner.client.post("/api/v1/tokens", json={})).status_code == 201

    async def test_no_credentials_or_an_unknown_token_is_401(self, dashboard: Dashboard) -> None:
        async with dashboard.client() as client:
            anonymous = await client.get("/api/v1/me")
            bogus = await client.get("/api/v1/me", headers={"Authorization": "Bearer hbk_nope"})
        assert anonymous.status_code == bogus.status_code == 401
        assert anonymous.headers["www-authenticate"] == "Bearer"


class TestThrottling:
    async def test_per_user_even_with_the_right_password(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        limit = dashboard.settings.login_limit_per_user
        async with dashboard.client() as client:
            for _ in range(limit):
                wrong = await client.post(
                    "/api/v1/auth/login", json={"username": owner.username, "password": "wrong!!"}
                )
                assert wrong.status_code == 401
            refused = await client.post(
                "/api/v1/auth/login", json={"username": owner.username, "password": PASSWORD}
            )
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json()["retryAfter"] >= 1
        # another user from the same address is not affected
        other = await dashboard.owner()
        await other.login()

    async def test_per_address(self, dashboard_settings: DashboardSettings) -> None:
        settings = dashboard_settings.model_copy(
            update={
                "login_limit_per_address": 3,
                "redis_key_prefix": f"hookbay:test:{unique_name()}:",
            }
        )
        async with serve_dashboard(settings) as served, served.client() as client:
            answers = [
                await client.post(
                    "/api/v1/auth/login", json={"username": unique_name("u"), "password": "x"}
                )
                for _ in range(4)
            ]
        assert [a.status_code for a in answers] == [401, 401, 401, 429]

    async def test_installations_sharing_a_redis_keep_their_limits_apart(
        self, dashboard_settings: DashboardSettings
    ) -> None:
        """Two dashboards of two installations (namespaces) on one Redis, no prefix set: the
        address's limit spent on one leaves the other's whole."""
        base = dashboard_settings.kafka_namespace
        installations = [
            dashboard_settings.model_copy(
                update={
                    "login_limit_per_address": 2,
                    "redis_key_prefix": None,
                    "kafka_namespace": f"{base}.{unique_name(n)}",
                }
            )
            for n in ("a", "b")
        ]
        assert installations[0].redis_prefix == f"{installations[0].kafka_namespace}:"
        login = {"username": unique_name("u"), "password": "x"}
        statuses = []
        for settings in installations:
            async with serve_dashboard(settings) as served, served.client() as client:
                for _ in range(3):
                    answer = await client.post("/api/v1/auth/login", json=login)
                    statuses.append(answer.status_code)
        assert statuses == [401, 401, 429] * 2


class TestTokens:
    async def test_create_list_use_revoke(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        created = await owner.client.post("/api/v1/tokens", json={"name": "deploy"})
        assert created.status_code == 201
        issued = created.json()
        assert issued["token"].startswith("hbk_")
        listed = (await owner.client.get("/api/v1/tokens")).json()
        assert {t["name"] for t in listed} == {"initial", "deploy"}
        assert all("token" not in t and "token_hash" not in t for t in listed)
        async with dashboard.client(headers={"Authorization": f"Bearer {issued['token']}"}) as c:
            assert (await c.get("/api/v1/me")).json()["username"] == owner.username
            revoked = await owner.client.delete(f"/api/v1/tokens/{issued['id']}")
            assert revoked.status_code == 204
            assert (await c.get("/api/v1/me")).status_code == 401
        again = await owner.client.delete(f"/api/v1/tokens/{issued['id']}")
        assert again.status_code == 404
        stored = await dashboard.runtime.db.api_tokens.find_one({"username": owner.username})
        assert stored is not None
        assert owner.token not in str(stored)

    async def test_last_used_is_recorded(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await owner.client.get("/api/v1/me")
        (token,) = (await owner.client.get("/api/v1/tokens")).json()
        assert token["last_used_at"] is not None


class TestAdmin:
    async def test_only_admins(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        for method, path in [
            ("GET", "/api/v1/admin/users"),
            ("POST", "/api/v1/admin/users"),
            ("PATCH", f"/api/v1/admin/users/{owner.username}"),
        ]:
            response = await owner.client.request(method, path, json={"username": "abc"})
            assert response.status_code == 403, (method, path)
            assert response.json()["error"] == "Admin role required"

    async def test_manage_users_and_plans(self, dashboard: Dashboard) -> None:
        admin = await dashboard.owner(admin=True)
        name = unique_name("u")
        created = await admin.client.post(
            "/api/v1/admin/users", json={"username": name, "plan": "starter", "password": PASSWORD}
        )
        assert created.status_code == 201
        assert created.json()["token"].startswith("hbk_")
        assert "password_hash" not in created.text
        listed = (await admin.client.get("/api/v1/admin/users")).json()
        assert {"username": name, "plan": "starter", "role": "user"}.items() <= next(
            u for u in listed if u["username"] == name
        ).items()
        changed = await admin.client.patch(
            f"/api/v1/admin/users/{name}", json={"plan": "pro", "role": "admin"}
        )
        assert changed.status_code == 200
        assert (changed.json()["plan"], changed.json()["role"]) == ("pro", "admin")
        duplicate = await admin.client.post("/api/v1/admin/users", json={"username": name})
        assert duplicate.status_code == 409
        unknown_plan = await admin.client.patch(
            f"/api/v1/admin/users/{name}", json={"plan": "platinum"}
        )
        assert unknown_plan.status_code == 400
        assert "platinum" in unknown_plan.json()["message"]
        missing = await admin.client.patch("/api/v1/admin/users/nobody-here", json={})
        assert missing.status_code == 404
        bad_name = await admin.client.post("/api/v1/admin/users", json={"username": "Bad_Name"})
        assert bad_name.status_code == 400

    async def test_a_new_password_ends_the_users_sessions(self, dashboard: Dashboard) -> None:
        admin = await dashboard.owner(admin=True)
        owner = await dashboard.owner()
        client, _ = await owner.login()
        response = await admin.client.patch(
            f"/api/v1/admin/users/{owner.username}", json={"password": "another password"}
        )
        assert response.status_code == 200
        assert (await client.get("/api/v1/me")).status_code == 401

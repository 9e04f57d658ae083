"""The SPA beside the API: hashed assets cached for good, ``index.html`` for any other page
path (deep links, reloads), JSON 404s for the API, health and metrics untouched, the strict CSP
on every answer. Against a static folder made by the test (``mount_spa``) and against the real
build served by the real app (``make test`` builds it first)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from hookbay_dashboard.app import install_error_handlers
from hookbay_dashboard.spa import CSP, IMMUTABLE, STATIC_DIR, mount_spa
from tests.support.dashboard import Dashboard

INDEX = "<!doctype html><title>hookbay</title><script src='/assets/app-1a2b3c.js'></script>"


def create_static(root: Path) -> Path:
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text(INDEX)
    (root / "theme.js").write_text("/* theme */")
    (root / "assets" / "app-1a2b3c.js").write_text("console.log('app')")
    return root


def create_client(static: Path) -> httpx.AsyncClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/api/v1/known")
    async def known() -> dict[str, str]:
        return {"ok": "yes"}

    mount_spa(app, static)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://spa")


class TestMountSpa:
    async def test_deep_links_get_the_index_uncached_with_the_csp(self, tmp_path: Path) -> None:
        async with create_client(create_static(tmp_path)) as client:
            for path in ["/", "/webhooks/orders/events?status=failed", "/events/evt_1", "/nope/x"]:
                response = await client.get(path)
                assert response.status_code == 200, path
                assert response.text == INDEX
                assert response.headers["content-type"].startswith("text/html")
                assert response.headers["cache-control"] == "no-cache"
                assert response.headers["content-security-policy"] == CSP
                assert response.headers["x-frame-options"] == "DENY"

    async def test_hashed_assets_are_immutable_and_a_missing_one_is_404(
        self, tmp_path: Path
    ) -> None:
        async with create_client(create_static(tmp_path)) as client:
            asset = await client.get("/assets/app-1a2b3c.js")
            missing = await client.get("/assets/app-000000.js")
            theme = await client.get("/theme.js")
        assert asset.status_code == 200
        assert asset.headers["cache-control"] == IMMUTABLE
        assert asset.headers["content-security-policy"] == CSP
        assert missing.status_code == 404
        assert missing.json()["error"] == "Not found"
        assert theme.text == "/* theme */"
        assert theme.headers["cache-control"] == "no-cache"

    async def test_api_paths_keep_their_json(self, tmp_path: Path) -> None:
        async with create_client(create_static(tmp_path)) as client:
            known = await client.get("/api/v1/known")
            unknown = await client.get("/api/v1/no/such/route")
            bare = await client.get("/api")
            posted = await client.post("/webhooks")
            head_known = await client.head("/api/v1/known")
            head_unknown = await client.head("/api/v1/no/such/route")
        assert known.json() == {"ok": "yes"}
        assert (head_known.status_code, head_known.headers["allow"]) == (405, "GET")
        assert head_unknown.status_code == 404
        assert unknown.status_code == bare.status_code == 404
        assert unknown.json()["error"] == "Not found"
        assert bare.headers["content-type"] == "application/json"
        assert posted.status_code == 405

    async def test_without_a_build_the_root_says_how_to_make_one(self, tmp_path: Path) -> None:
        async with create_client(tmp_path / "absent") as client:
            response = await client.get("/")
        assert response.status_code == 404
        assert "make web" in response.json()["message"]


class TestServedBuild:
    async def test_the_real_app_serves_the_built_spa_beside_the_api(
        self, dashboard: Dashboard
    ) -> None:
        if not (STATIC_DIR / "index.html").is_file():
            pytest.fail("the SPA is not built: `make web` (make test does it)")
        async with dashboard.client() as client:
            page = await client.get("/webhooks/orders/events")
            script = page.text.split('src="/assets/', 1)[1].split('"', 1)[0]
            asset = await client.get(f"/assets/{script}")
            api_404 = await client.get("/api/v1/does-not-exist")
            ready = await client.get("/readyz")
            metrics = await client.get("/metrics")
            metrics_post = await client.post("/metrics")
        assert page.status_code == 200
        assert page.headers["content-security-policy"] == CSP
        assert asset.headers["cache-control"] == IMMUTABLE
        assert asset.headers["content-type"].startswith("text/javascript")
        assert api_404.status_code == 404
        assert api_404.json()["error"] == "Not found"
        assert ready.json()["ready"] is True
        assert metrics.status_code == 200  # itself, not a redirect to /metrics/
        assert "hookbay_dashboard_requests_total" in metrics.text
        assert metrics_post.status_code == 405
        assert set(metrics_post.headers["allow"].split(", ")) == {"GET", "HEAD"}

"""Every destination operation of the dashboard API on the real store and change log, and
every bad field answered 422 with a detail naming it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hookbay_common.clock import utcnow
from hookbay_common.configlog import Entity, decode_change
from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import Dashboard, Owner, serve_dashboard
from tests.support.kafka import TopicReader

API = "/api/v1/destinations"


async def create(owner: Owner, name: str = "billing", **body: object) -> httpx.Response:
    fields: dict[str, object] = {"url": "http://127.0.0.1:9/in", **body}
    return await owner.client.post(API, json={"name": name, **fields})


class TestCreate:
    async def test_created_with_its_defaults(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        response = await create(owner)
        assert response.status_code == 201, response.text
        created = response.json()
        assert created["id"].startswith("dst_")
        expected = {
            "username": owner.username, "name": "billing", "url": "http://127.0.0.1:9/in",
            "timeout_s": 10, "headers": {}, "retry_schedule": None, "rate_limit": None,
            "max_concurrency": 20, "state": "active", "state_reason": None,
        }  # fmt: skip
        assert {k: created[k] for k in expected} == expected
        assert (await owner.client.get(f"{API}/billing")).json() == created

    async def test_every_field_set(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        response = await create(
            owner, timeout_s=60, headers={"Authorization": "Bearer s3cret-header"},
            retry_schedule=["0", "500ms", "10s", "1m", "6h"],
            rate_limit={"count": 5, "period": "second"}, max_concurrency=1,
        )  # fmt: skip
        assert response.status_code == 201, response.text
        created = response.json()
        assert created["headers"] == {"authorization": "********"}
        assert created["retry_schedule"] == ["0", "500ms", "10s", "1m", "6h"]
        assert created["rate_limit"] == {"count": 5, "period": "second"}
        assert (created["timeout_s"], created["max_concurrency"]) == (60, 1)
        assert "s3cret-header" not in response.text
        stored = await dashboard.runtime.db.destinations.find_one({"_id": created["id"]})
        assert stored is not None
        assert "s3cret-header" not in str(stored)  # sealed at rest
        destination = await dashboard.runtime.destinations.require(owner.username, "billing")
        assert destination.headers["authorization"].get_secret_value() == "Bearer s3cret-header"

    async def test_a_taken_name_is_409(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        assert (await create(owner)).status_code == 201
        again = await create(owner)
        assert again.status_code == 409
        assert again.json()["error"] == "Destination already exists"

    async def test_two_owners_may_use_one_name(self, dashboard: Dashboard) -> None:
        first, second = await dashboard.owner(), await dashboard.owner()
        assert (await create(first)).status_code == 201
        assert (await create(second)).status_code == 201
        assert [d["name"] for d in (await second.client.get(API)).json()] == ["billing"]

    @pytest.mark.parametrize(
        ("body", "loc", "fragment"),
        [
            ({"name": "Billing"}, ["body", "name"], "invalid name"),
            ({"name": "a--b"}, ["body", "name"], "invalid name"),
            ({"name": "x" * 65}, ["body", "name"], "at most 64"),
            ({"name": ""}, ["body", "name"], "at least 1"),
            ({"url": "ftp://example.com/x"}, ["body", "url"], "http"),
            ({"url": "http://user:pw@example.com/"}, ["body", "url"], "credentials"),
            ({"url": "not a url"}, ["body", "url"], "http"),
            ({"url": "http://x/" + "a" * 2100}, ["body", "url"], "at most 2048"),
            ({"url": None}, ["body", "url"], "valid string"),
            ({"timeout_s": 0}, ["body", "timeout_s"], "greater than or equal to 1"),
            ({"timeout_s": 61}, ["body", "timeout_s"], "less than or equal to 60"),
            ({"timeout_s": "ten"}, ["body", "timeout_s"], "valid integer"),
            ({"max_concurrency": 0}, ["body", "max_concurrency"], "greater than or equal to 1"),
            ({"max_concurrency": 65}, ["body", "max_concurrency"], "less than or equal to 64"),
            ({"headers": {"bad name": "v"}}, ["body", "headers"], "HTTP token"),
            ({"headers": {"Host": "evil"}}, ["body", "headers"], "set by hookbay"),
            ({"headers": {"x-hookbay-attempt": "9"}}, ["body", "headers"], "set by hookbay"),
            ({"headers": {"content-type": "text/plain"}}, ["body", "headers"], "set by hookbay"),
            ({"headers": {"a": "1", "A": "2"}}, ["body", "headers"], "given twice"),
            ({"headers": {"a": ""}}, ["body", "headers"], "a value of 1"),
            ({"headers": {"a": "x\r\nb: y"}}, ["body", "headers"], "control characters"),
            ({"headers": {"a": " padded"}}, ["body", "headers"], "surrounding spaces"),
            ({"headers": {"a": "€"}}, ["body", "headers"], "Latin-1"),
            ({"headers": {"a": 1}}, ["body", "headers", "a"], "valid string"),
            ({"headers": {f"h{i}": "v" for i in range(21)}}, ["body", "headers"], "at most 20"),
            ({"headers": {"a": "********"}}, ["body", "headers"], "stored value reads as"),
            ({"retry_schedule": []}, ["body", "retry_schedule"], "at least 1"),
            ({"retry_schedule": ["soon"]}, ["body", "retry_schedule"], "not a duration"),
            ({"retry_schedule": ["0", "8d"]}, ["body", "retry_schedule"], "not a duration"),
            ({"retry_schedule": ["0", "200h"]}, ["body", "retry_schedule"], "longer than 7 days"),
            ({"retry_schedule": [0, 10]}, ["body", "retry_schedule", 0], "valid string"),
            ({"retry_schedule": ["0"] * 21}, ["body", "retry_schedule"], "at most 20"),
            ({"rate_limit": {"count": 0, "period": "second"}}, ["body", "rate_limit", "count"],
             "greater than or equal to 1"),
            ({"rate_limit": {"count": 5, "period": "day"}}, ["body", "rate_limit", "period"],
             "'second', 'minute' or 'hour'"),
            ({"rate_limit": {"count": 5}}, ["body", "rate_limit", "period"], "required"),
            ({"rate_limit": 5}, ["body", "rate_limit"], "valid dictionary"),
            ({"state": "paused"}, ["body", "state"], "not permitted"),
            ({"colour": "red"}, ["body", "colour"], "not permitted"),
        ],
    )  # fmt: skip
    async def test_each_bad_field_is_a_422_naming_it(
        self, dashboard: Dashboard, body: dict[str, Any], loc: list[Any], fragment: str
    ) -> None:
        owner = await dashboard.owner()
        response = await create(owner, **{"name": "billing", **body})
        assert response.status_code == 422, response.text
        answer = response.json()
        assert loc in [d["loc"] for d in answer["detail"]], answer
        assert fragment in answer["message"], answer
        assert (await owner.client.get(API)).json() == []

    async def test_a_missing_name_or_url_is_a_422(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        for body in ({"url": "http://127.0.0.1:9/"}, {"name": "billing"}, {}):
            response = await owner.client.post(API, json=body)
            assert response.status_code == 422, (body, response.text)
            assert "required" in response.json()["message"]

    async def test_private_destinations_are_refused_unless_allowed(
        self, dashboard_settings: DashboardSettings
    ) -> None:
        strict = dashboard_settings.model_copy(update={"allow_private_destinations": False})
        async with serve_dashboard(strict) as served:
            owner = await served.owner()
            for url in ("http://127.0.0.1:8080/x", "http://10.1.2.3/x", "http://169.254.169.254/"):
                response = await create(owner, url=url)
                assert response.status_code == 422, url
                detail = response.json()["detail"]
                assert detail[0]["loc"] == ["body", "url"]
                assert detail[0]["type"] == "destination_not_allowed"
                assert "non-public address" in detail[0]["msg"]


class TestChange:
    async def test_each_field_changes_alone(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner, headers={"authorization": "Bearer one", "x-team": "core"})

        async def patch(**body: object) -> dict[str, Any]:
            response = await owner.client.patch(f"{API}/billing", json=body)
            assert response.status_code == 200, response.text
            return dict(response.json())

        assert (await patch(url="http://127.0.0.1:9/new"))["url"] == "http://127.0.0.1:9/new"
        assert (await patch(timeout_s=3))["timeout_s"] == 3
        assert (await patch(max_concurrency=64))["max_concurrency"] == 64
        assert (await patch(retry_schedule=["0", "1s"]))["retry_schedule"] == ["0", "1s"]
        assert (await patch(retry_schedule=None))["retry_schedule"] is None
        limited = await patch(rate_limit={"count": 100, "period": "hour"})
        assert limited["rate_limit"] == {"count": 100, "period": "hour"}
        assert (await patch(rate_limit=None))["rate_limit"] is None
        unchanged = await patch()
        assert (unchanged["url"], unchanged["timeout_s"]) == ("http://127.0.0.1:9/new", 3)
        assert unchanged["headers"] == {"authorization": "********", "x-team": "********"}

    async def test_headers_replace_the_map_and_the_mask_keeps_a_value(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        await create(owner, headers={"authorization": "Bearer one", "x-team": "core"})
        response = await owner.client.patch(
            f"{API}/billing",
            json={"headers": {"Authorization": "********", "x-new": "fresh"}},
        )
        assert response.status_code == 200, response.text
        assert response.json()["headers"] == {"authorization": "********", "x-new": "********"}
        stored = await dashboard.runtime.destinations.require(owner.username, "billing")
        assert {k: v.get_secret_value() for k, v in stored.headers.items()} == {
            "authorization": "Bearer one", "x-new": "fresh",
        }  # fmt: skip
        cleared = await owner.client.patch(f"{API}/billing", json={"headers": None})
        assert cleared.json()["headers"] == {}

    async def test_the_mask_for_a_header_not_stored_is_a_422(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        response = await owner.client.patch(
            f"{API}/billing", json={"headers": {"x-unknown": "********"}}
        )
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"] == ["body", "headers", "x-unknown"]

    @pytest.mark.parametrize(
        ("body", "loc"),
        [
            ({"url": None}, ["body", "url"]),
            ({"timeout_s": None}, ["body", "timeout_s"]),
            ({"max_concurrency": None}, ["body", "max_concurrency"]),
            ({"url": "gopher://x"}, ["body", "url"]),
            ({"timeout_s": 100}, ["body", "timeout_s"]),
            ({"name": "other"}, ["body", "name"]),
            ({"state": "active"}, ["body", "state"]),
        ],
    )
    async def test_bad_changes_are_a_422_and_change_nothing(
        self, dashboard: Dashboard, body: dict[str, Any], loc: list[str]
    ) -> None:
        owner = await dashboard.owner()
        before = (await create(owner)).json()
        response = await owner.client.patch(f"{API}/billing", json=body)
        assert response.status_code == 422, response.text
        assert loc in [d["loc"] for d in response.json()["detail"]]
        assert (await owner.client.get(f"{API}/billing")).json() == before

    async def test_unknown_names_are_404(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        for method, path in [
            ("GET", f"{API}/nope"), ("PATCH", f"{API}/nope"), ("DELETE", f"{API}/nope"),
            ("POST", f"{API}/nope/pause"), ("POST", f"{API}/nope/resume"),
        ]:  # fmt: skip
            body: dict[str, Any] | None = {} if method in {"PATCH", "POST"} else None
            response = await owner.client.request(method, path, json=body)
            assert response.status_code == 404, (method, path)
            assert response.json()["error"] == "Destination not found"


class TestStates:
    async def test_pause_then_resume(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        paused = (await owner.client.post(f"{API}/billing/pause")).json()
        assert (paused["state"], paused["state_reason"]) == ("paused", "manual")
        again = (await owner.client.post(f"{API}/billing/pause")).json()
        assert again == paused  # idempotent: nothing written
        resumed = (await owner.client.post(f"{API}/billing/resume")).json()
        assert (resumed["state"], resumed["state_reason"]) == ("active", None)
        assert (await owner.client.post(f"{API}/billing/resume")).json() == resumed

    async def test_resume_re_enables_a_disabled_destination(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        await dashboard.runtime.destinations.update(
            owner.username, "billing", {"state": "disabled", "state_reason": "gone"}
        )
        held = (await owner.client.post(f"{API}/billing/pause")).json()
        assert (held["state"], held["state_reason"]) == ("disabled", "gone")
        resumed = (await owner.client.post(f"{API}/billing/resume")).json()
        assert (resumed["state"], resumed["state_reason"]) == ("active", None)

    async def test_resume_closes_the_stored_breaker(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        await dashboard.runtime.destinations.update(
            owner.username, "billing",
            {"state": "disabled", "state_reason": "sustained_failure", "breaker.state": "open",
             "breaker.opened_at": utcnow()},
        )  # fmt: skip
        resumed = (await owner.client.post(f"{API}/billing/resume")).json()
        assert (resumed["state"], resumed["breaker"]["state"]) == ("active", "closed")
        assert resumed["breaker"]["opened_at"] is None

    async def test_pause_takes_over_a_breaker_pause(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        await dashboard.runtime.destinations.update(
            owner.username, "billing", {"state": "paused", "state_reason": "breaker"}
        )
        paused = (await owner.client.post(f"{API}/billing/pause")).json()
        assert (paused["state"], paused["state_reason"]) == ("paused", "manual")


class TestDelete:
    async def test_deleted(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        assert (await owner.client.delete(f"{API}/billing")).status_code == 204
        assert (await owner.client.get(f"{API}/billing")).status_code == 404
        assert (await owner.client.delete(f"{API}/billing")).status_code == 404
        assert (await create(owner)).status_code == 201  # the name is free again

    async def test_a_destination_routes_use_is_409_naming_them(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        await create(owner)
        for hook in ("orders", "refunds"):
            await owner.client.post("/api/v1/webhooks", json={"name": hook})
            created = await owner.client.post(
                f"/api/v1/webhooks/{hook}/routes",
                json={"name": "to-billing", "destination": "billing"},
            )
            assert created.status_code == 201, created.text
        response = await owner.client.delete(f"{API}/billing")
        assert response.status_code == 409
        answer = response.json()
        assert answer["error"] == "Destination in use"
        assert answer["routes"] == ["orders/to-billing", "refunds/to-billing"]
        assert "orders/to-billing" in answer["message"]
        for hook in ("orders", "refunds"):
            await owner.client.delete(f"/api/v1/webhooks/{hook}/routes/to-billing")
        assert (await owner.client.delete(f"{API}/billing")).status_code == 204


class TestChangeLog:
    async def test_each_change_reaches_the_change_log_with_headers_sealed(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        await create(owner, headers={"authorization": "Bearer log-me-not"})
        await owner.client.post(f"{API}/billing/pause")
        await owner.client.delete(f"{API}/billing")
        topic = dashboard.settings.topics.config
        key = f"destination:{owner.username}/billing".encode()
        reader = TopicReader(dashboard.settings.kafka_bootstrap, topic, bytes)
        await reader.start(from_beginning=True)
        try:
            records = [m for m in await reader.to_end() if m.key == key]
        finally:
            await reader.stop()
        assert len(records) == 3
        assert all(b"log-me-not" not in r.value for r in records)
        created, paused, deleted = (decode_change(r.value, dashboard.runtime.box) for r in records)
        assert created.key == (Entity.DESTINATION.value, owner.username, "billing")
        assert created.destination is not None
        assert created.destination.headers["authorization"].get_secret_value() == (
            "Bearer log-me-not"
        )
        assert paused.destination is not None
        assert paused.destination.state == "paused"
        assert deleted.deleted

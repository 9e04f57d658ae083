"""A webhook's routes through the dashboard API on the real store and change log: order,
every field, the limits, every bad field answered 422 naming it, and the dry run."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import pytest

from hookbay_common.clock import utcnow
from hookbay_common.configlog import decode_change
from hookbay_common.models import Event, HandshakeKind, RejectedReason
from tests.support.dashboard import Dashboard, Owner
from tests.support.factories import create_event
from tests.support.kafka import TopicReader

HOOKS = "/api/v1/webhooks"


async def setup(dashboard: Dashboard, *destinations: str) -> Owner:
    """An owner with the webhook ``orders`` and the named destinations."""
    owner = await dashboard.owner()
    assert (await owner.client.post(HOOKS, json={"name": "orders"})).status_code == 201
    for name in destinations or ("billing",):
        response = await owner.client.post(
            "/api/v1/destinations", json={"name": name, "url": f"http://127.0.0.1:9/{name}"}
        )
        assert response.status_code == 201, response.text
    return owner


async def add(owner: Owner, name: str, **body: object) -> httpx.Response:
    fields: dict[str, object] = {"destination": "billing", **body}
    return await owner.client.post(f"{HOOKS}/orders/routes", json={"name": name, **fields})


async def names(owner: Owner) -> list[str]:
    routes = (await owner.client.get(f"{HOOKS}/orders/routes")).json()
    assert [r["position"] for r in routes] == list(range(len(routes)))
    return [r["name"] for r in routes]


class TestCreate:
    async def test_created_with_its_defaults(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        response = await add(owner, "all-to-billing")
        assert response.status_code == 201, response.text
        route = response.json()
        assert route["id"].startswith("rte_")
        expected = {
            "name": "all-to-billing", "webhook": "orders", "position": 0,
            "destination": "billing", "enabled": True, "filter": None, "transform": None,
            "dedupe": None, "delay_s": None,
        }  # fmt: skip
        assert {k: route[k] for k in expected} == expected
        assert (await owner.client.get(f"{HOOKS}/orders/routes/all-to-billing")).json() == route

    async def test_stored_in_the_webhook_with_the_filter_as_text(
        self, dashboard: Dashboard
    ) -> None:
        owner = await setup(dashboard)
        spec = {"body": {"type": {"$startsWith": "invoice."}, "data.amount": {"$gte": 100}}}
        assert (await add(owner, "invoices", filter=spec)).status_code == 201
        stored = await dashboard.runtime.db.webhooks.find_one(
            {"username": owner.username, "name": "orders"}
        )
        assert stored is not None
        (route,) = stored["routes"]
        assert json.loads(route["filter"]) == spec
        read = (await owner.client.get(f"{HOOKS}/orders/routes/invoices")).json()
        assert read["filter"] == spec

    async def test_creation_order_and_positions(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        for name in ("a", "b", "c"):
            assert (await add(owner, name)).status_code == 201
        assert await names(owner) == ["a", "b", "c"]
        first = await add(owner, "first", position=0)
        assert first.json()["position"] == 0
        assert (await add(owner, "middle", position=2)).status_code == 201
        assert (await add(owner, "last", position=5)).status_code == 201
        assert await names(owner) == ["first", "a", "middle", "b", "c", "last"]

    async def test_a_taken_name_is_409(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        assert (await add(owner, "r")).status_code == 201
        again = await add(owner, "r")
        assert again.status_code == 409
        assert again.json()["error"] == "Route already exists"

    async def test_twenty_routes_at_most(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        for index in range(20):
            assert (await add(owner, f"r{index}")).status_code == 201
        over = await add(owner, "one-more")
        assert over.status_code == 409
        assert over.json()["error"] == "Route limit reached"
        assert len(await names(owner)) == 20

    async def test_one_name_on_two_webhooks(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        await owner.client.post(HOOKS, json={"name": "refunds"})
        assert (await add(owner, "r")).status_code == 201
        other = await owner.client.post(
            f"{HOOKS}/refunds/routes", json={"name": "r", "destination": "billing"}
        )
        assert other.status_code == 201
        assert other.json()["webhook"] == "refunds"

    @pytest.mark.parametrize(
        ("body", "loc", "fragment"),
        [
            ({"name": "Route"}, ["body", "name"], "invalid name"),
            ({"name": "a_b"}, ["body", "name"], "invalid name"),
            ({"name": "x" * 65}, ["body", "name"], "at most 64"),
            ({"destination": "nowhere"}, ["body", "destination"], "no destination named"),
            ({"destination": None}, ["body", "destination"], "valid string"),
            ({"destination": ""}, ["body", "destination"], "at least 1"),
            ({"enabled": "maybe"}, ["body", "enabled"], "valid boolean"),
            ({"filter": "type = paid"}, ["body", "filter"], "valid dictionary"),
            ({"filter": {"path": {"a": 1}}}, ["body", "filter", "path"], "filter /path"),
            ({"filter": {"body": {"k": "v" * 17000}}}, ["body", "filter"], "at most"),
            ({"transform": "reshape"}, ["body", "transform"], "no transformation named"),
            ({"dedupe": {"window_s": 60}}, ["body", "dedupe"], "exactly one of preset or fields"),
            ({"dedupe": {"window_s": 60, "preset": "github", "fields": ["body.id"]}},
             ["body", "dedupe"], "both given"),
            ({"dedupe": {"window_s": 60, "preset": "gitlab"}},
             ["body", "dedupe", "preset"], "'github'"),
            ({"dedupe": {"window_s": 0, "preset": "github"}},
             ["body", "dedupe", "window_s"], "greater than or equal to 1"),
            ({"dedupe": {"window_s": 604801, "preset": "github"}},
             ["body", "dedupe", "window_s"], "less than or equal to 604800"),
            ({"dedupe": {"window_s": "1h", "preset": "github"}},
             ["body", "dedupe", "window_s"], "valid integer"),
            ({"dedupe": {"preset": "github"}}, ["body", "dedupe", "window_s"], "required"),
            ({"dedupe": {"window_s": 60, "fields": ["id"]}},
             ["body", "dedupe", "fields", 0], "must start with 'body.'"),
            ({"dedupe": {"window_s": 60, "fields": ["body.id", "headers.bad name"]}},
             ["body", "dedupe", "fields", 1], "not an HTTP header name"),
            ({"dedupe": {"window_s": 60, "fields": []}}, ["body", "dedupe", "fields"], "1 to 5"),
            ({"dedupe": {"window_s": 60, "fields": ["headers.X-A", "headers.x-a"]}},
             ["body", "dedupe", "fields"], "named twice"),
            ({"dedupe": {"window_s": 60, "preset": "github", "scope": "owner"}},
             ["body", "dedupe", "scope"], "not permitted"),
            ({"dedupe": "github"}, ["body", "dedupe"], "valid dictionary"),
            ({"delay_s": -1}, ["body", "delay_s"], "greater than or equal to 0"),
            ({"delay_s": 86401}, ["body", "delay_s"], "less than or equal to 86400"),
            ({"delay_s": 1.5}, ["body", "delay_s"], "valid integer"),
            ({"delay_s": "soon"}, ["body", "delay_s"], "valid integer"),
            ({"position": -1}, ["body", "position"], "greater than or equal to 0"),
            ({"position": 1}, ["body", "position"], "at most 0"),
            ({"colour": "red"}, ["body", "colour"], "not permitted"),
        ],
    )  # fmt: skip
    async def test_each_bad_field_is_a_422_naming_it(
        self, dashboard: Dashboard, body: dict[str, Any], loc: list[str], fragment: str
    ) -> None:
        owner = await setup(dashboard)
        response = await add(owner, **{"name": "r", **body})
        assert response.status_code == 422, response.text
        answer = response.json()
        assert answer["detail"][0]["loc"][: len(loc)] == loc, answer
        assert fragment in answer["message"], answer
        assert await names(owner) == []

    @pytest.mark.parametrize(
        ("spec", "pointer", "fragment"),
        [
            ({"body": {"amount": {"$gtx": 5}}}, "/body/amount/$gtx", "unknown operator $gtx"),
            ({"body": {"type": {"$in": "paid"}}}, "/body/type/$in", "needs a list"),
            ({"headers": {"x-n": 5}}, "/headers/x-n", ""),
            ({"body": {"a": {}}}, "/body/a", ""),
            ({"path": {"a": 1}}, "/path", ""),
        ],
    )
    async def test_a_filter_the_engine_refuses_names_its_pointer(
        self, dashboard: Dashboard, spec: dict[str, Any], pointer: str, fragment: str
    ) -> None:
        owner = await setup(dashboard)
        response = await add(owner, "r", filter=spec)
        assert response.status_code == 422, response.text
        answer = response.json()
        (detail,) = answer["detail"]
        assert (detail["pointer"], detail["type"]) == (pointer, "filter_invalid")
        assert detail["loc"] == ["body", "filter", *pointer.split("/")[1:]]
        assert f"filter {pointer}: " in answer["message"]
        assert fragment in detail["msg"]
        assert await names(owner) == []

    async def test_null_reserved_fields_are_accepted(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        response = await add(owner, "r", transform=None, dedupe=None, delay_s=None, filter=None)
        assert response.status_code == 201, response.text


class TestChange:
    async def test_each_field_changes_alone(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard, "billing", "analytics")
        created = (await add(owner, "r", filter={"body": {"type": "paid"}})).json()

        async def patch(**body: object) -> dict[str, Any]:
            response = await owner.client.patch(f"{HOOKS}/orders/routes/r", json=body)
            assert response.status_code == 200, response.text
            return dict(response.json())

        assert (await patch(destination="analytics"))["destination"] == "analytics"
        assert (await patch(enabled=False))["enabled"] is False
        assert (await patch(filter={"headers": {"x-kind": "a"}}))["filter"] == {
            "headers": {"x-kind": "a"}
        }
        cleared = await patch(filter=None)
        assert (cleared["filter"], cleared["destination"], cleared["enabled"]) == (
            None, "analytics", False,
        )  # fmt: skip
        assert cleared["id"] == created["id"]
        unchanged = await patch()
        assert unchanged == cleared
        assert (await patch(delay_s=86400))["delay_s"] == 86400
        assert (await patch(delay_s=0))["delay_s"] is None  # 0: no delay
        assert (await patch(delay_s=30))["delay_s"] == 30
        assert (await patch(delay_s=None))["delay_s"] is None

    async def test_a_delay_is_kept_and_shown(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        created = await add(owner, "r", delay_s=90)
        assert (created.status_code, created.json()["delay_s"]) == (201, 90)
        assert (await owner.client.get(f"{HOOKS}/orders/routes/r")).json()["delay_s"] == 90
        listed = (await owner.client.get(f"{HOOKS}/orders/routes")).json()
        assert [r["delay_s"] for r in listed] == [90]

    async def test_dedupe_is_set_replaced_and_removed(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        created = await add(owner, "r", dedupe={"window_s": 3600, "preset": "github"})
        assert created.status_code == 201, created.text
        assert created.json()["dedupe"] == {"window_s": 3600, "preset": "github", "fields": None}

        async def patch(**body: object) -> dict[str, Any]:
            response = await owner.client.patch(f"{HOOKS}/orders/routes/r", json=body)
            assert response.status_code == 200, response.text
            return dict(response.json())

        own = {"window_s": 60, "fields": ["body.data.id", "headers.X-Tenant"]}
        changed = await patch(dedupe=own)
        assert changed["dedupe"] == {
            "window_s": 60, "preset": None, "fields": ["body.data.id", "headers.x-tenant"]
        }  # fmt: skip
        assert (await patch(enabled=False))["dedupe"] == changed["dedupe"]  # kept when not sent
        webhook = await dashboard.runtime.webhooks.require(owner.username, "orders")
        rule = webhook.routes[0].dedupe
        assert rule is not None
        assert (rule.window_s, rule.fields) == (60, ("body.data.id", "headers.x-tenant"))
        assert (await patch(dedupe=None))["dedupe"] is None
        webhook = await dashboard.runtime.webhooks.require(owner.username, "orders")
        assert webhook.routes[0].dedupe is None

    async def test_position_moves_a_route(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        for name in ("a", "b", "c", "d"):
            await add(owner, name)
        moved = await owner.client.patch(f"{HOOKS}/orders/routes/d", json={"position": 0})
        assert moved.json()["position"] == 0
        assert await names(owner) == ["d", "a", "b", "c"]
        await owner.client.patch(f"{HOOKS}/orders/routes/d", json={"position": 3})
        assert await names(owner) == ["a", "b", "c", "d"]
        await owner.client.patch(f"{HOOKS}/orders/routes/a", json={"position": 2})
        assert await names(owner) == ["b", "c", "a", "d"]

    @pytest.mark.parametrize(
        ("body", "loc"),
        [
            ({"destination": None}, ["body", "destination"]),
            ({"enabled": None}, ["body", "enabled"]),
            ({"position": None}, ["body", "position"]),
            ({"position": 2}, ["body", "position"]),
            ({"destination": "nowhere"}, ["body", "destination"]),
            ({"filter": {"nope": {}}}, ["body", "filter", "nope"]),
            ({"filter": {"body": {"n": {"$lt": []}}}}, ["body", "filter", "body", "n", "$lt"]),
            ({"transform": "t"}, ["body", "transform"]),
            ({"delay_s": 86401}, ["body", "delay_s"]),
            ({"name": "renamed"}, ["body", "name"]),
            ({"dedupe": {"window_s": 60}}, ["body", "dedupe"]),
            ({"dedupe": {"window_s": 60, "preset": "svix"}}, ["body", "dedupe", "preset"]),
            ({"dedupe": {"window_s": 60, "fields": ["body."]}}, ["body", "dedupe", "fields", 0]),
        ],
    )
    async def test_bad_changes_are_a_422_and_change_nothing(
        self, dashboard: Dashboard, body: dict[str, Any], loc: list[str]
    ) -> None:
        owner = await setup(dashboard)
        await add(owner, "a")
        before = (await add(owner, "r")).json()
        response = await owner.client.patch(f"{HOOKS}/orders/routes/r", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"][: len(loc)] == loc
        assert (await owner.client.get(f"{HOOKS}/orders/routes/r")).json() == before

    async def test_webhook_changes_keep_the_routes(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        await add(owner, "r")
        patched = await owner.client.patch(
            f"{HOOKS}/orders", json={"forward_url": "http://127.0.0.1:9/legacy"}
        )
        assert patched.status_code == 200
        await owner.client.post(f"{HOOKS}/orders/deactivate")
        assert await names(owner) == ["forward_url", "r"]  # the forward_url's route, first
        webhook = await dashboard.runtime.webhooks.require(owner.username, "orders")
        assert webhook.forward_url == "http://127.0.0.1:9/legacy"
        removed = await owner.client.patch(f"{HOOKS}/orders", json={"forward_url": None})
        assert removed.status_code == 200
        assert await names(owner) == ["r"]


class TestDelete:
    async def test_deleted_and_the_rest_keep_their_order(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        for name in ("a", "b", "c"):
            await add(owner, name)
        assert (await owner.client.delete(f"{HOOKS}/orders/routes/b")).status_code == 204
        assert await names(owner) == ["a", "c"]
        assert (await owner.client.get(f"{HOOKS}/orders/routes/b")).status_code == 404
        assert (await owner.client.delete(f"{HOOKS}/orders/routes/b")).status_code == 404
        for name in ("a", "c"):
            await owner.client.delete(f"{HOOKS}/orders/routes/{name}")
        stored = await dashboard.runtime.db.webhooks.find_one(
            {"username": owner.username, "name": "orders"}
        )
        assert stored is not None
        assert "routes" not in stored  # as a webhook stored before routes existed

    async def test_a_deleted_webhook_takes_its_routes(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        await add(owner, "r")
        await owner.client.delete(f"{HOOKS}/orders")
        await owner.client.post(HOOKS, json={"name": "orders"})
        assert await names(owner) == []
        assert (await owner.client.delete("/api/v1/destinations/billing")).status_code == 204

    async def test_unknown_webhook_or_route_is_404(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        calls = [
            ("GET", f"{HOOKS}/nope/routes", "Webhook not found"),
            ("POST", f"{HOOKS}/nope/routes", "Webhook not found"),
            ("GET", f"{HOOKS}/orders/routes/nope", "Route not found"),
            ("PATCH", f"{HOOKS}/orders/routes/nope", "Route not found"),
            ("DELETE", f"{HOOKS}/orders/routes/nope", "Route not found"),
            ("POST", f"{HOOKS}/orders/routes/nope/dry-run", "Route not found"),
            ("POST", f"{HOOKS}/nope/routes/r/dry-run", "Webhook not found"),
        ]
        for method, path, error in calls:
            body: dict[str, Any] | None = None
            if method == "POST" and path.endswith("/routes"):
                body = {"name": "r", "destination": "billing"}
            elif method in {"POST", "PATCH"}:
                body = {}
            response = await owner.client.request(method, path, json=body)
            assert (response.status_code, response.json()["error"]) == (404, error), path


class TestChangeLog:
    async def test_the_webhook_record_carries_its_routes(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        await add(owner, "a", filter={"body": {"type": "paid"}})
        await add(owner, "b", enabled=False, delay_s=600)
        key = f"webhook:{owner.username}/orders".encode()
        reader = TopicReader(
            dashboard.settings.kafka_bootstrap, dashboard.settings.topics.config, bytes
        )
        await reader.start(from_beginning=True)
        try:
            records = [m for m in await reader.to_end() if m.key == key]
        finally:
            await reader.stop()
        latest = decode_change(records[-1].value, dashboard.runtime.box)
        assert latest.webhook is not None
        assert [(r.name, r.enabled, r.filter, r.delay_s) for r in latest.webhook.routes] == [
            ("a", True, {"body": {"type": "paid"}}, None), ("b", False, None, 600),
        ]  # fmt: skip
        first = json.loads(records[0].value)
        assert "routes" not in first["record"]  # readable by a replica of an earlier version
        second = json.loads(records[1].value)
        (undelayed,) = second["record"]["routes"]
        assert "delay_s" not in undelayed  # the same


async def store(dashboard: Dashboard, owner: Owner, count: int, **fields: Any) -> list[Event]:
    """``count`` events of ``orders``, a second apart, oldest first."""
    webhook = await dashboard.runtime.webhooks.require(owner.username, "orders")
    start = utcnow() - timedelta(minutes=10)
    events = [
        create_event(
            username=owner.username,
            webhook_id=webhook.id,
            webhook_name="orders",
            created_at=start + timedelta(seconds=i),
            **fields,
        )
        for i in range(count)
    ]
    await dashboard.runtime.events.upsert_many(events)
    return events


class TestDryRun:
    async def test_the_saved_route_over_the_newest_events(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        await add(owner, "r")
        events = await store(dashboard, owner, 5)
        response = await owner.client.post(f"{HOOKS}/orders/routes/r/dry-run", json={"last": 3})
        assert response.status_code == 200, response.text
        run = response.json()
        assert (run["webhook"], run["route"], run["saved"]) == ("orders", "r", True)
        assert (run["evaluated"], run["matched"]) == (3, 3)
        assert [e["event_id"] for e in run["events"]] == [e.id for e in reversed(events)][:3]
        assert all(e["matched"] and e["reason"] is None for e in run["events"])
        default = (await owner.client.post(f"{HOOKS}/orders/routes/r/dry-run", json={})).json()
        assert default["evaluated"] == 5

    async def test_what_routing_never_takes(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        await add(owner, "r", enabled=False)
        await store(dashboard, owner, 1, rejected_reason=RejectedReason.INVALID_SIGNATURE)
        await store(dashboard, owner, 1, handshake=HandshakeKind.SLACK_URL_VERIFICATION)
        run = (await owner.client.post(f"{HOOKS}/orders/routes/r/dry-run", json={})).json()
        reasons = sorted(e["reason"] for e in run["events"])
        assert run["matched"] == 0
        assert "rejected" in reasons[1]
        assert "handshake" in reasons[0]
        draft = {"route": {"enabled": False}}
        disabled = await owner.client.post(f"{HOOKS}/orders/routes/r/dry-run", json=draft)
        assert disabled.status_code == 200
        await store(dashboard, owner, 1)
        run = (await owner.client.post(f"{HOOKS}/orders/routes/r/dry-run", json={})).json()
        assert run["events"][0]["reason"] == "the route is disabled"

    async def test_the_filter_decides_with_reasons(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        spec = {"body": {"type": {"$startsWith": "invoice."}}, "headers": {"x-env": "live"}}
        await add(owner, "invoices", filter=spec)
        live = {"content-type": "application/json", "x-env": "live"}
        paid, refund, test_env, text = (
            await store(dashboard, owner, 1, body=b'{"type": "invoice.paid"}',
                        request_headers=live),
            await store(dashboard, owner, 1, body=b'{"type": "charge.refunded"}',
                        request_headers=live),
            await store(dashboard, owner, 1, body=b'{"type": "invoice.paid"}',
                        request_headers={"content-type": "application/json", "x-env": "test"}),
            await store(dashboard, owner, 1, body=b"type=invoice.paid", content_type="text/plain",
                        request_headers={"content-type": "text/plain", "x-env": "live"}),
        )  # fmt: skip
        run = (await owner.client.post(f"{HOOKS}/orders/routes/invoices/dry-run", json={})).json()
        verdicts = {e["event_id"]: e for e in run["events"]}
        assert run["matched"] == 1
        assert verdicts[paid[0].id]["matched"] is True
        assert verdicts[paid[0].id]["pointer"] is None
        assert verdicts[refund[0].id]["pointer"] == "/body/type/$startsWith"
        assert "charge.refunded" in verdicts[refund[0].id]["reason"]
        assert verdicts[test_env[0].id]["pointer"] == "/headers/x-env"
        assert verdicts[text[0].id]["matched"] is False  # a text body has no fields
        draft = {"route": {"filter": {"body": {"type": "charge.refunded"}}}}
        tried = await owner.client.post(f"{HOOKS}/orders/routes/invoices/dry-run", json=draft)
        assert [e["event_id"] for e in tried.json()["events"] if e["matched"]] == [refund[0].id]

    async def test_an_unsaved_route(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        await store(dashboard, owner, 2)
        body = {"route": {"name": "proposal", "destination": "billing", "filter": None}, "last": 10}
        response = await owner.client.post(f"{HOOKS}/orders/routes/new-one/dry-run", json=body)
        assert response.status_code == 200, response.text
        run = response.json()
        assert (run["route"], run["saved"], run["evaluated"]) == ("proposal", False, 2)
        assert await names(owner) == []  # nothing saved

    async def test_each_matched_event_shows_its_dedupe_key_or_none(
        self, dashboard: Dashboard
    ) -> None:
        owner = await setup(dashboard)
        rule = {"window_s": 60, "fields": ["body.id", "headers.x-tenant"]}
        await add(owner, "r", dedupe=rule, filter={"body": {"take": True}})
        keyed = {"content-type": "application/json", "x-tenant": "acme"}
        (full,) = await store(dashboard, owner, 1, body=b'{"id": 7, "take": true}',
                              request_headers=keyed)  # fmt: skip
        (twin,) = await store(dashboard, owner, 1, body=b'{"id": 7.0, "take": true}',
                              request_headers=keyed)  # fmt: skip
        (partial,) = await store(dashboard, owner, 1, body=b'{"id": 7, "take": true}')
        (skipped,) = await store(dashboard, owner, 1, body=b'{"id": 7}', request_headers=keyed)
        run = (await owner.client.post(f"{HOOKS}/orders/routes/r/dry-run", json={})).json()
        shown = {e["event_id"]: e["dedupe"] for e in run["events"]}
        assert shown[full.id]["fields"] == {"body.id": 7, "headers.x-tenant": "acme"}
        assert shown[full.id]["missing"] == []
        assert len(shown[full.id]["key"]) == 64
        assert shown[twin.id] == shown[full.id]  # 7 and 7.0: one key
        assert shown[partial.id] == {
            "key": None, "fields": {"body.id": 7}, "missing": ["headers.x-tenant"]
        }  # fmt: skip
        assert shown[skipped.id] is None  # filtered: no key shown
        draft = {"route": {"dedupe": {"window_s": 5, "preset": "stripe"}}}
        tried = (await owner.client.post(f"{HOOKS}/orders/routes/r/dry-run", json=draft)).json()
        assert {e["dedupe"]["missing"][0] if e["dedupe"]["key"] is None else "key"
                for e in tried["events"]} == {"key"}  # fmt: skip
        plain = await add(owner, "plain")
        assert plain.status_code == 201
        run = (await owner.client.post(f"{HOOKS}/orders/routes/plain/dry-run", json={})).json()
        assert {e["dedupe"] for e in run["events"]} == {None}

    async def test_a_webhook_without_events(self, dashboard: Dashboard) -> None:
        owner = await setup(dashboard)
        await add(owner, "r")
        run = (await owner.client.post(f"{HOOKS}/orders/routes/r/dry-run", json={})).json()
        assert (run["evaluated"], run["matched"], run["events"]) == (0, 0, [])

    @pytest.mark.parametrize(
        ("body", "loc"),
        [
            ({"last": 0}, ["body", "last"]),
            ({"last": 101}, ["body", "last"]),
            ({"last": "all"}, ["body", "last"]),
            ({"route": {"transform": "t"}}, ["body", "route", "transform"]),
            ({"route": {"filter": {"nope": 1}}}, ["body", "route", "filter", "nope"]),
            (
                {"route": {"filter": {"body": {"a": {"$gtx": 1}}}}},
                ["body", "route", "filter", "body", "a", "$gtx"],
            ),
            ({"route": "r"}, ["body", "route"]),
            (
                {"route": {"dedupe": {"window_s": 9e9, "preset": "github"}}},
                ["body", "route", "dedupe", "window_s"],
            ),
            ({"extra": 1}, ["body", "extra"]),
        ],
    )
    async def test_bad_requests_are_a_422(
        self, dashboard: Dashboard, body: dict[str, Any], loc: list[str]
    ) -> None:
        owner = await setup(dashboard)
        await add(owner, "r")
        response = await owner.client.post(f"{HOOKS}/orders/routes/r/dry-run", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"][: len(loc)] == loc

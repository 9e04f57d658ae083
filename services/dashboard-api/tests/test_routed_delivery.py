"""Routed delivery end to end on real services: destinations and routes made through the API
reach ingest and the forwarder on the change log; ingest → Kafka → router → deliveries topic →
a destination's lane → real local destinations; the recorder writes each delivery's status,
which ``GET /events/{id}`` shows. Another owner sees none of it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookbay_common.db.forwarding import keep_forward_route
from hookbay_common.settings import Settings
from hookbay_dashboard.settings import DashboardSettings
from tests.support.factories import create_webhook
from tests.support.receiver import Receiver, Reply
from tests.support.routed import RoutedStack, event_ids, make, routed_stack
from tests.support.waiting import until


@pytest.fixture(scope="module")
async def stack(
    settings: Settings, dashboard_settings: DashboardSettings, receiver: Receiver
) -> AsyncIterator[RoutedStack]:
    async with routed_stack(settings, dashboard_settings, receiver) as routed:
        yield routed


class TestRoutedDelivery:
    async def test_fan_out_byte_exact_with_a_filter_and_destination_headers(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        urls = [stack.receiver.url() for _ in range(3)]
        await make(owner, "/webhooks", {"name": "orders"})
        for index, url in enumerate(urls):
            await make(owner, "/destinations", {
                "name": f"d{index}", "url": url,
                "headers": {"Authorization": f"Bearer token-{index}"},
            })  # fmt: skip
        await make(owner, "/webhooks/orders/routes", {"name": "all", "destination": "d0"})
        await make(owner, "/webhooks/orders/routes", {"name": "copy", "destination": "d1"})
        await make(owner, "/webhooks/orders/routes", {
            "name": "invoices", "destination": "d2",
            "filter": {"body": {"type": {"$startsWith": "invoice."}}},
        })  # fmt: skip
        await stack.routed(owner, "orders")

        charge = b'{"type": "charge.failed",  "amount": 1}'
        invoice = b'{"type": "invoice.paid", "n": [1, 2]}'
        first = await stack.send(owner, "orders", charge)
        second = await stack.send(owner, "orders", invoice)

        done = await stack.event(owner, "orders", first, "success", 3)
        by_route = {d["route"]: d for d in done["deliveries"]}
        assert by_route["all"]["status"] == by_route["copy"]["status"] == "success"
        assert by_route["invoices"]["status"] == "filtered"
        assert "charge.failed" in by_route["invoices"]["reason"]
        assert by_route["all"]["destination"] == "d0"
        await stack.event(owner, "orders", second, "success", 3)

        for index, url in enumerate(urls):
            bodies = [r.body for r in stack.receiver.received(url)]
            assert bodies == ([charge, invoice] if index < 2 else [invoice])
            auth = {r.header("authorization") for r in stack.receiver.received(url)}
            assert auth == {f"Bearer token-{index}"}

        other = await stack.owner()
        hidden = await other.client.get(f"/api/v1/events/{done['id']}")
        assert hidden.status_code == 404

    async def test_query_filter_and_a_retry_on_its_destinations_schedule(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        url = stack.receiver.url(Reply(503, b"busy"))
        await make(owner, "/webhooks", {"name": "hooks"})
        await make(owner, "/destinations",
                   {"name": "flaky", "url": url, "retry_schedule": ["0", "1s"]})  # fmt: skip
        await make(owner, "/webhooks/hooks/routes", {
            "name": "from-a", "destination": "flaky", "filter": {"query": {"src": "a"}},
        })  # fmt: skip
        await stack.routed(owner, "hooks")

        skipped = await stack.send(owner, "hooks", b"{}", query="src=b")
        taken = await stack.send(owner, "hooks", b"{}", query="src=a&x")
        filtered = await stack.event(owner, "hooks", skipped, "success", 1)
        assert filtered["deliveries"][0]["status"] == "filtered"
        delivered = await stack.event(owner, "hooks", taken, "success", 1)
        (delivery,) = delivered["deliveries"]
        assert delivery["status"] == "success"
        assert [a["status_code"] for a in delivery["attempts"]] == [503, 200]
        assert [r.header("x-hookbay-attempt") for r in stack.receiver.received(url)] == ["1", "2"]

    async def test_pause_holds_every_event_and_resume_delivers_them_in_order(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        url = stack.receiver.url()
        await make(owner, "/webhooks", {"name": "serial"})
        await make(owner, "/destinations",
                   {"name": "legacy", "url": url, "max_concurrency": 1})  # fmt: skip
        await make(owner, "/webhooks/serial/routes", {"name": "only", "destination": "legacy"})
        await stack.routed(owner, "serial")
        paused = await owner.client.post("/api/v1/destinations/legacy/pause")
        assert paused.json()["state"] == "paused"
        await stack.forwarder_sees(owner, "legacy", "paused")

        sent = [await stack.send(owner, "serial", json.dumps({"n": n}).encode()) for n in range(6)]
        events = [await stack.event(owner, "serial", r, "pending", 1) for r in sent]
        assert {e["deliveries"][0]["status"] for e in events} == {"held"}
        assert stack.receiver.received(url) == []

        resumed = await owner.client.post("/api/v1/destinations/legacy/resume")
        assert resumed.json()["state"] == "active"
        for request_id in sent:
            await stack.event(owner, "serial", request_id, "success", 1)
        assert event_ids(stack.receiver, url) == [e["id"] for e in events]

    async def test_an_attempt_running_long_shows_delivering_then_its_end(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        gate = asyncio.Event()
        url = stack.receiver.url(Reply(gate=gate))
        await make(owner, "/webhooks", {"name": "slow"})
        await make(owner, "/destinations", {"name": "slow", "url": url, "timeout_s": 60})
        await make(owner, "/webhooks/slow/routes", {"name": "only", "destination": "slow"})
        await stack.routed(owner, "slow")
        request_id = await stack.send(owner, "slow", b"{}")
        try:
            running = await stack.event(owner, "slow", request_id, "pending", 1)

            async def delivering() -> bool:
                found = await owner.client.get(f"/api/v1/events/{running['id']}")
                return bool(found.json()["deliveries"][0]["status"] == "delivering")

            await until(delivering, 60, interval=0.1, what="the delivery shows delivering")
        finally:
            gate.set()
        done = await stack.event(owner, "slow", request_id, "success", 1)
        assert done["deliveries"][0]["status"] == "success"


class TestBreaker:
    async def test_opens_holds_then_after_the_probe_delivers_every_held_event_once_in_order(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        url = stack.receiver.url(Reply(503), Reply(503), Reply(503), then=Reply(200))
        await make(owner, "/webhooks", {"name": "tripping"})
        await make(owner, "/destinations", {
            "name": "shaky", "url": url, "max_concurrency": 1, "retry_schedule": ["0", "1h"],
            "breaker": {"consecutive": 3, "cooldown_s": 5, "max_cooldown_s": 5},
        })  # fmt: skip
        await make(owner, "/webhooks/tripping/routes", {"name": "only", "destination": "shaky"})
        await stack.routed(owner, "tripping")

        sent = [
            await stack.send(owner, "tripping", json.dumps({"n": n}).encode()) for n in range(6)
        ]
        state: dict[str, Any] = {}

        async def opened() -> bool:
            nonlocal state
            state = (await owner.client.get("/api/v1/destinations/shaky")).json()
            return bool(state["state_reason"] == "breaker")

        await until(opened, 30, interval=0.05, what="the breaker pauses the destination")
        assert state["state"] == "paused"
        assert state["breaker"]["state"] == "open"
        assert state["breaker"]["opened_at"] is not None
        assert state["breaker"]["next_probe_at"] is not None
        assert len(stack.receiver.received(url)) == 3  # the three 503s; the rest is held
        await stack.forwarder_sees(owner, "shaky", "paused")

        later = [await stack.event(owner, "tripping", r, "success", 1) for r in sent[3:]]
        earlier = [await stack.event(owner, "tripping", r, "pending", 1) for r in sent[:3]]
        delivered = event_ids(stack.receiver, url)
        assert delivered == [e["id"] for e in earlier + later]  # the held ones once, in order
        codes = [[a["status_code"] for a in e["attempts"]] for e in earlier + later]
        assert codes == [[503]] * 3 + [[200]] * 3  # the first held one was the probe

        async def closed() -> bool:
            nonlocal state
            state = (await owner.client.get("/api/v1/destinations/shaky")).json()
            return bool(state["state"] == "active")

        await until(closed, 30, interval=0.05, what="the probe closes the breaker")
        assert (state["state_reason"], state["breaker"]["state"]) == (None, "closed")
        issues: list[dict[str, Any]] = []

        async def resolved() -> bool:
            nonlocal issues
            issues = (await owner.client.get("/api/v1/issues")).json()
            return any(i["status"] == "resolved" for i in issues)

        await until(resolved, 30, interval=0.05, what="the breaker's issue resolved")
        assert [(i["type"], i["destination"], i["reason"]) for i in issues] == [
            ("delivery", "shaky", "breaker"),
        ]  # fmt: skip


class TestRoutedReplay:
    async def test_a_replay_routes_again_and_its_deliveries_alone_give_the_status(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        broken = stack.receiver.url(then=Reply(400, b"bad"))
        fixed = stack.receiver.url()
        await make(owner, "/webhooks", {"name": "replayed"})
        await make(owner, "/destinations", {"name": "svc", "url": broken})
        await make(owner, "/destinations", {"name": "audit", "url": fixed})
        await make(owner, "/webhooks/replayed/routes", {"name": "main", "destination": "svc"})
        await stack.routed(owner, "replayed")
        request_id = await stack.send(owner, "replayed", b'{"kind": "a"}')
        failed = await stack.event(owner, "replayed", request_id, "failed", 1)

        # fix the destination and add a route whose filter this event fails
        changed = await owner.client.patch("/api/v1/destinations/svc", json={"url": fixed})
        assert changed.status_code == 200, changed.text
        await make(owner, "/webhooks/replayed/routes", {
            "name": "b-only", "destination": "audit", "filter": {"body": {"kind": "b"}},
        })  # fmt: skip
        await stack.forwarder_sees(owner, "svc", "active")

        async def url_fixed() -> bool:
            found = await stack.forwarder.view.destination(owner.username, "svc")
            return found is not None and found.url == fixed

        await until(url_fixed, 30, interval=0.05, what="the forwarder sees the fixed URL")
        replayed = await owner.client.post(f"/api/v1/events/{failed['id']}/replay")
        assert replayed.status_code == 202, replayed.text
        accepted = replayed.json()
        assert (accepted["url"], accepted["routes"]) == (None, ["main", "b-only"])

        done = await stack.event(owner, "replayed", request_id, "success", 3)
        latest = [d for d in done["deliveries"] if d["id"] != failed["deliveries"][0]["id"]]
        assert sorted((d["route"], d["status"]) for d in latest) == [
            ("b-only", "filtered"), ("main", "success"),
        ]  # fmt: skip
        assert [a["trigger"] for a in done["attempts"]] == ["initial", "replay"]
        assert len(stack.receiver.received(fixed)) == 1

        other = await stack.owner()
        refused = await other.client.post(f"/api/v1/events/{failed['id']}/replay")
        assert refused.status_code == 404


class TestDeliveryRetry:
    async def test_one_delivery_retried_alone_moves_its_event_and_nobody_else_s(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        broken = stack.receiver.url(then=Reply(400, b"bad"))
        fixed, audit = stack.receiver.url(), stack.receiver.url()
        await make(owner, "/webhooks", {"name": "retried"})
        await make(owner, "/destinations", {"name": "svc", "url": broken})
        await make(owner, "/destinations", {"name": "audit", "url": audit})
        await make(owner, "/webhooks/retried/routes", {"name": "main", "destination": "svc"})
        await make(owner, "/webhooks/retried/routes", {"name": "audit", "destination": "audit"})
        await make(owner, "/webhooks/retried/routes", {
            "name": "b-only", "destination": "audit", "filter": {"body": {"kind": "b"}},
        })  # fmt: skip
        await stack.routed(owner, "retried")
        request_id = await stack.send(owner, "retried", b'{"kind": "a"}')
        failed = await stack.event(owner, "retried", request_id, "failed", 3)
        by_route = {d["route"]: d for d in failed["deliveries"]}
        assert by_route["main"]["status"] == "failed"

        other = await stack.owner()
        for who, delivery_id in [(other, by_route["main"]["id"]), (owner, "dlv_nothing"),
                                 (owner, by_route["main"]["id"].replace("dlv_0", "dlv_1"))]:  # fmt: skip
            missing = await who.client.post(f"/api/v1/deliveries/{delivery_id}/retry")
            assert missing.status_code == 404, missing.text
        filtered = await owner.client.post(f"/api/v1/deliveries/{by_route['b-only']['id']}/retry")
        assert filtered.status_code == 409
        assert "filter did not match" in filtered.json()["message"]

        changed = await owner.client.patch("/api/v1/destinations/svc", json={"url": fixed})
        assert changed.status_code == 200, changed.text
        retried = await owner.client.post(f"/api/v1/deliveries/{by_route['main']['id']}/retry")
        assert retried.status_code == 202, retried.text
        accepted = retried.json()
        assert (accepted["route"], accepted["destination"], accepted["status"]) == (
            "main", "svc", "scheduled",
        )  # fmt: skip

        done = await stack.event(owner, "retried", request_id, "success", 3)
        after = {d["route"]: d for d in done["deliveries"]}
        assert after["main"]["id"] == by_route["main"]["id"]
        assert [(a["status_code"], a["trigger"]) for a in after["main"]["attempts"]] == [
            (400, "initial"), (200, "replay"),
        ]  # fmt: skip
        assert after["main"]["attempts"][1]["chain_id"] == accepted["chain_id"]
        assert after["audit"] == by_route["audit"]
        assert [r.body for r in stack.receiver.received(fixed)] == [b'{"kind": "a"}']
        assert len(stack.receiver.received(audit)) == 1


class TestForwardUrl:
    async def test_delivered_as_its_route_paused_and_resumed_like_any_destination(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        url = stack.receiver.url()
        await make(owner, "/webhooks", {"name": "fwd", "forward_url": url})
        await stack.routed(owner, "fwd")
        body = b'{"n":  1, "s": "\\u00e9"}'
        first = await stack.send(owner, "fwd", body)
        done = await stack.event(owner, "fwd", first, "success", 1)
        (delivery,) = done["deliveries"]
        assert (delivery["route"], delivery["destination"], delivery["status"]) == (
            "forward_url", "fwd.forward_url", "success",
        )  # fmt: skip
        assert done["forward_url"] == url
        assert [r.body for r in stack.receiver.received(url)] == [body]

        paused = await owner.client.post("/api/v1/destinations/fwd.forward_url/pause")
        assert paused.status_code == 200, paused.text
        await stack.forwarder_sees(owner, "fwd.forward_url", "paused")
        held = await stack.send(owner, "fwd", b'{"n": 2}')
        waiting = await stack.event(owner, "fwd", held, "pending", 1)
        assert waiting["deliveries"][0]["status"] == "held"
        assert len(stack.receiver.received(url)) == 1
        await owner.client.post("/api/v1/destinations/fwd.forward_url/resume")
        await stack.event(owner, "fwd", held, "success", 1)
        assert [r.body for r in stack.receiver.received(url)] == [body, b'{"n": 2}']

    async def test_a_webhook_stored_before_forward_url_was_a_route_is_upgraded_in_place(
        self, stack: RoutedStack
    ) -> None:
        """Stored as before: the forwarder's own path delivers it (no deliveries); after the
        upgrade (``hookbay-admin migrate``'s step) its route does, and the first event keeps
        what it had."""
        owner = await stack.owner()
        url = stack.receiver.url()
        rt = stack.dashboard.runtime
        webhook = create_webhook(username=owner.username, name="legacy", forward_url=url)
        await rt.webhooks.create(webhook)
        await rt.config.webhook_changed(webhook)

        async def known() -> bool:
            return await stack.ingest.view.webhook(owner.username, "legacy") is not None

        await until(known, 30, interval=0.05, what="the legacy webhook reaches ingest")
        before = await stack.send(owner, "legacy", b'{"v": 1}')
        old = await stack.event(owner, "legacy", before, "success", 0)
        assert [a["status_code"] for a in old["attempts"]] == [200]

        # migrate's step for this webhook (the command runs it over every webhook stored)
        change = await keep_forward_route(rt.webhooks, rt.destinations, webhook, url)
        assert change.changed
        assert change.destination is not None
        await rt.config.destination_changed(change.destination)
        await rt.config.webhook_changed(change.webhook)
        await stack.routed(owner, "legacy")
        after = await stack.send(owner, "legacy", b'{"v": 2}')
        new = await stack.event(owner, "legacy", after, "success", 1)
        assert new["deliveries"][0]["route"] == "forward_url"
        assert [r.body for r in stack.receiver.received(url)] == [b'{"v": 1}', b'{"v": 2}']
        assert (await stack.event(owner, "legacy", before, "success", 0))["attempts"] == (
            old["attempts"]
        )

    async def test_a_destinations_failed_deliveries_retried_together_and_no_others(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        broken, fixed = stack.receiver.url(then=Reply(400, b"bad")), stack.receiver.url()
        other = stack.receiver.url(then=Reply(400, b"bad"))
        await make(owner, "/destinations", {"name": "svc", "url": broken})
        await make(owner, "/destinations", {"name": "other", "url": other})
        for hook in ("one", "two"):
            await make(owner, "/webhooks", {"name": hook})
            await make(owner, f"/webhooks/{hook}/routes", {"name": "main", "destination": "svc"})
        await make(owner, "/webhooks/one/routes", {"name": "side", "destination": "other"})
        for hook in ("one", "two"):
            await stack.routed(owner, hook)
        sent = [
            ("one", await stack.send(owner, "one", b'{"n": 1}'), 2),
            ("one", await stack.send(owner, "one", b'{"n": 2}'), 2),
            ("two", await stack.send(owner, "two", b'{"n": 3}'), 1),
        ]
        for hook, request_id, routes in sent:
            await stack.event(owner, hook, request_id, "failed", routes)

        missing = await (await stack.owner()).client.post("/api/v1/destinations/svc/retry-failed")
        assert missing.status_code == 404
        changed = await owner.client.patch("/api/v1/destinations/svc", json={"url": fixed})
        assert changed.status_code == 200, changed.text
        path = "/api/v1/destinations/svc/retry-failed"
        first = await owner.client.post(path, json={"limit": 2})
        assert first.status_code == 202, first.text
        assert (first.json()["retried"], first.json()["next"] is not None) == (2, True)
        rest = (await owner.client.post(path, json={"after": first.json()["next"]})).json()
        assert (rest["retried"], rest["next"]) == (1, None)
        bad = await owner.client.post(path, json={"after": "not-a-position"})
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "after"]

        two = await stack.event(owner, "two", sent[2][1], "success", 1)
        assert [a["status_code"] for a in two["deliveries"][0]["attempts"]] == [400, 200]
        for _, request_id, _ in sent[:2]:

            async def retried(request_id: str = request_id) -> bool:
                found = await stack.event(owner, "one", request_id, "failed", 2)
                return {d["route"]: d["status"] for d in found["deliveries"]} == {
                    "main": "success", "side": "failed",
                }  # fmt: skip

            await until(retried, 60, interval=0.1, what="svc delivered again, other still failed")
        assert sorted(r.body for r in stack.receiver.received(fixed)) == [
            b'{"n": 1}', b'{"n": 2}', b'{"n": 3}',
        ]  # fmt: skip
        assert len(stack.receiver.received(other)) == 2  # never retried
        again = (await owner.client.post(path)).json()
        assert (again["retried"], again["next"]) == (0, None)

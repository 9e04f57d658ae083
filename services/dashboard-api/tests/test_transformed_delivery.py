"""Routes that run transformations, end to end on real services: transformations and routes
made through the API reach the forwarder on the change log; ingest → Kafka → router → a
destination's lane → the transformation in the forwarder's sandbox → a real local destination;
the recorder writes each delivery with its transformation's trace, which ``GET /events/{id}``
shows. Failures, suspension, fairness between owners and isolation."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from hookbay_common.settings import Settings
from hookbay_dashboard.settings import DashboardSettings
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.recorder import Recorder
from hookbay_ingest.app import Ingest, create_app
from tests.support.dashboard import Dashboard, Owner, serve_dashboard
from tests.support.forwarder import forwarder_namespace, running
from tests.support.ingest import ingest_settings
from tests.support.receiver import Receiver
from tests.support.transform import HOSTILE_CODE
from tests.support.waiting import until

RESHAPE = """
addHandler('transform', (request, context) => {
  console.log('order', request.body.id);
  request.body = { order: request.body.id, key: context.env.KEY };
  request.headers['x-shape'] = 'erp';
  delete request.headers['x-drop'];
  return request;
});
"""
SPIN = "addHandler('transform', (request) => { while (true) {} });"
THROW = "addHandler('transform', (request) => { throw new Error('no ' + request.body.id); });"
FORGET = "addHandler('transform', (request) => { console.log('forgot'); });"
IDENTITY = "addHandler('transform', (request) => request);"
HOST_DEADLINE = "no answer within 2 s: the sandbox was stopped"


@dataclass
class Stack:
    dashboard: Dashboard
    ingest: Ingest
    intake: httpx.AsyncClient
    receiver: Receiver
    forwarder: Forwarder

    async def send(
        self, owner: Owner, webhook: str, body: bytes, headers: dict[str, str] | None = None
    ) -> str:
        path = f"/w/{owner.username}/{webhook}"
        sent = {"content-type": "application/json", **(headers or {})}
        answers: list[httpx.Response] = []

        async def answered() -> bool:  # a 503 (Kafka slow on a new topic) is sent again
            answers.append(await self.intake.post(path, content=body, headers=sent))
            return answers[-1].status_code != 503

        await until(answered, 60, interval=0.2, what=f"an answer to {path}")
        assert answers[-1].status_code == 200, answers[-1].text
        request_id: str = answers[-1].json()["requestId"]
        return request_id

    async def routed(self, owner: Owner, webhook: str, routes: int) -> None:
        """Until ingest and the forwarder hold the webhook with its ``routes`` routes."""

        async def seen() -> bool:
            hook = await self.ingest.view.webhook(owner.username, webhook)
            held = await self.forwarder.view.webhook(owner.username, webhook)
            return all(h is not None and len(h.routes) == routes for h in (hook, held))

        await until(seen, 30, interval=0.05, what=f"routes of {webhook} arrive")

    async def detail(self, owner: Owner, webhook: str, request_id: str) -> dict[str, Any]:
        listing = await owner.client.get(
            f"/api/v1/webhooks/{webhook}/events", params={"request_id": request_id}
        )
        items = listing.json().get("items", []) if listing.status_code == 200 else []
        if not items:
            return {}
        found: dict[str, Any] = (await owner.client.get(f"/api/v1/events/{items[0]['id']}")).json()
        return found

    async def event(
        self,
        owner: Owner,
        webhook: str,
        request_id: str,
        status: str,
        deliveries: int,
        timeout: float = 60,
    ) -> dict[str, Any]:
        """The event, once it has ``status`` and ``deliveries`` deliveries."""
        found: dict[str, Any] = {}

        async def settled() -> bool:
            nonlocal found
            found = await self.detail(owner, webhook, request_id)
            return bool(
                found
                and found["status"] == status
                and len(found["deliveries"]) == deliveries
                and all(d["status"] not in ("scheduled", "held") for d in found["deliveries"])
            )

        try:
            await until(settled, timeout, interval=0.1, what=f"event {request_id} {status}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last seen: {found}") from None
        return found


async def make(owner: Owner, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await owner.client.post(f"/api/v1{path}", json=body)
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()
    return made


async def transformation(
    owner: Owner, name: str, code: str, env: dict[str, str] | None = None
) -> None:
    await make(owner, "/transformations", {"name": name, "code": code, "env": env or {}})


@pytest.fixture(scope="module")
async def stack(
    settings: Settings, dashboard_settings: DashboardSettings, receiver: Receiver
) -> AsyncIterator[Stack]:
    fs = await forwarder_namespace(settings)
    ds = dashboard_settings.model_copy(update={"kafka_namespace": fs.kafka_namespace})
    app = create_app(ingest_settings(settings, kafka_namespace=fs.kafka_namespace))
    forwarder = Forwarder(fs)
    async with (
        serve_dashboard(ds) as dashboard,
        running(forwarder),
        running(Recorder(fs)),
        app.router.lifespan_context(app),
    ):
        ingest: Ingest = app.state.ingest
        async with asyncio.timeout(30):
            await ingest.kafka_connected.wait()
            await ingest.view.following.wait()
        transport = httpx.ASGITransport(app=app, client=("198.51.100.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as intake:
            yield Stack(dashboard, ingest, intake, receiver, forwarder)


class TestTransformedDelivery:
    async def test_the_destination_receives_the_transformed_request(self, stack: Stack) -> None:
        owner = await stack.dashboard.owner()
        shaped, plain = stack.receiver.url(), stack.receiver.url()
        await transformation(owner, "erp-shape", RESHAPE, {"KEY": "k_secret_123"})
        await make(owner, "/webhooks", {"name": "orders"})
        await make(owner, "/destinations", {"name": "erp", "url": shaped})
        await make(owner, "/destinations", {"name": "raw", "url": plain})
        route = await make(owner, "/webhooks/orders/routes",
                           {"name": "to-erp", "destination": "erp", "transform": "erp-shape"})  # fmt: skip
        assert route["transform"] == "erp-shape"
        await make(owner, "/webhooks/orders/routes", {"name": "as-is", "destination": "raw"})
        await stack.routed(owner, "orders", 2)

        body = b'{"id": "ord_1", "amount": 7}'
        sent = await stack.send(owner, "orders", body, {"x-drop": "1", "x-keep": "2"})
        done = await stack.event(owner, "orders", sent, "success", 2)

        (received,) = stack.receiver.received(shaped)
        assert json.loads(received.body) == {"order": "ord_1", "key": "k_secret_123"}
        assert (received.header("x-shape"), received.header("x-keep")) == ("erp", "2")
        assert received.header("x-drop") is None
        assert received.header("content-type") == "application/json"
        assert [r.body for r in stack.receiver.received(plain)] == [body]

        by_route = {d["route"]: d for d in done["deliveries"]}
        trace = by_route["to-erp"]["transform"]
        assert trace == {
            "name": "erp-shape", "version": 1, "logs": ["order ord_1"],
            "body_sha256": hashlib.sha256(received.body).hexdigest(),
        }  # fmt: skip
        assert by_route["as-is"]["transform"] is None
        assert "k_secret_123" not in json.dumps(by_route)  # the env is never answered

        dry = await owner.client.post(
            "/api/v1/webhooks/orders/routes/to-erp/dry-run", json={"last": 5}
        )
        assert dry.status_code == 200, dry.text
        (tried,) = dry.json()["events"]
        assert tried["transform"]["request"]["body"] == {"order": "ord_1", "key": "k_secret_123"}
        assert tried["transform"]["logs"] == ["order ord_1"]
        assert tried["transform"]["error"] is None

    async def test_failing_transformations_are_transform_failed_with_their_reason(
        self, stack: Stack
    ) -> None:
        owner = await stack.dashboard.owner()
        urls = {name: stack.receiver.url() for name in ("spin", "throw", "forget")}
        await make(owner, "/webhooks", {"name": "hooks"})
        for name, code in (("spin", SPIN), ("throw", THROW), ("forget", FORGET)):
            await transformation(owner, name, code)
            await make(owner, "/destinations", {"name": f"to-{name}", "url": urls[name]})
            await make(owner, "/webhooks/hooks/routes",
                       {"name": name, "destination": f"to-{name}", "transform": name})  # fmt: skip
        await stack.routed(owner, "hooks", 3)

        sent = await stack.send(owner, "hooks", b'{"id": "x1"}')
        done = await stack.event(owner, "hooks", sent, "failed", 3)

        by_route = {d["route"]: d for d in done["deliveries"]}
        assert {d["status"] for d in by_route.values()} == {"transform_failed"}
        assert by_route["spin"]["reason"].startswith("timeout: ")
        assert by_route["throw"]["reason"].startswith("runtime: Error: no x1 (line 1, column")
        assert by_route["forget"]["reason"] == (
            "invalid_output: the handler returned undefined: return the request"
        )
        assert by_route["forget"]["transform"]["logs"] == ["forgot"]
        assert by_route["forget"]["transform"]["body_sha256"] is None
        for delivery in by_route.values():
            assert delivery["attempts"] == []  # nothing sent, nothing retried
        assert all(stack.receiver.received(url) == [] for url in urls.values())

    async def test_every_hostile_transformation_ends_transform_failed_with_its_reason(
        self, stack: Stack
    ) -> None:
        """Each hostile code of the sandbox's own suite, run by the forwarder's pool on a real
        event: code whose top level is hostile is refused when saved (the save runs the top
        level), every other one is a ``transform_failed`` delivery of its own route, reason
        ``<kind>: <message>``, nothing sent; then the pool still transforms."""
        owner = await stack.dashboard.owner()
        await make(owner, "/webhooks", {"name": "hostile"})
        sink = stack.receiver.url()
        await make(owner, "/destinations", {"name": "sink", "url": sink})
        routed: dict[str, tuple[str, str]] = {}
        for name, code, kind, reason in HOSTILE_CODE:
            saved = await owner.client.post(
                "/api/v1/transformations", json={"name": name, "code": code}
            )
            if "addHandler" not in code:  # top-level code: refused when saved, never routed
                assert saved.status_code == 422, saved.text
                assert reason in saved.text, saved.text
                continue
            assert saved.status_code == 201, saved.text
            await make(owner, "/webhooks/hostile/routes",
                       {"name": name, "destination": "sink", "transform": name})  # fmt: skip
            routed[name] = (kind, reason)
        await transformation(owner, "fine", IDENTITY)
        await make(owner, "/webhooks/hostile/routes",
                   {"name": "fine", "destination": "sink", "transform": "fine"})  # fmt: skip
        await stack.routed(owner, "hostile", len(routed) + 1)

        sent = await stack.send(owner, "hostile", b'{"id": "x1"}')
        done = await stack.event(owner, "hostile", sent, "failed", len(routed) + 1, timeout=180)

        by_route = {d["route"]: d for d in done["deliveries"]}
        assert by_route.pop("fine")["status"] == "success"
        for name, (kind, reason) in routed.items():
            delivery = by_route[name]
            assert delivery["status"] == "transform_failed", (name, delivery)
            assert delivery["reason"].startswith(f"{kind}: "), (name, delivery["reason"])
            # a spinner moved to the idle class may be stopped by the host's deadline before it
            # has had its CPU limit's worth of CPU, when the machine is busy
            ended_by_host = kind == "timeout" and HOST_DEADLINE in delivery["reason"]
            assert ended_by_host or reason in delivery["reason"], (name, delivery["reason"])
            assert delivery["attempts"] == []
        assert len(stack.receiver.received(sink)) == 1  # the "fine" route's, nothing else

    async def test_a_transformation_failing_again_and_again_is_suspended_until_edited(
        self, stack: Stack
    ) -> None:
        owner = await stack.dashboard.owner()
        url = stack.receiver.url()
        await transformation(owner, "brittle", THROW)
        await make(owner, "/webhooks", {"name": "jobs"})
        await make(owner, "/destinations", {"name": "worker", "url": url})
        await make(owner, "/webhooks/jobs/routes",
                   {"name": "r", "destination": "worker", "transform": "brittle"})  # fmt: skip
        await stack.routed(owner, "jobs", 1)

        reasons = []
        for number in range(6):  # one at a time: the sixth meets the suspension
            sent = await stack.send(owner, "jobs", json.dumps({"id": f"j{number}"}).encode())
            (delivery,) = (await stack.event(owner, "jobs", sent, "failed", 1))["deliveries"]
            reasons.append(delivery["reason"])
        assert all(r.startswith("runtime: Error: no j") for r in reasons[:5]), reasons
        assert reasons[5] == "suspended"

        async def issue(status: str) -> dict[str, Any] | None:
            found = await owner.client.get("/api/v1/issues", params={"status": status})
            return next((i for i in found.json() if i["transformation"] == "brittle"), None)

        opened = await issue("open")
        assert opened is not None
        assert (opened["type"], opened["reason"]) == ("transformation", "suspended")

        fixed = await owner.client.patch("/api/v1/transformations/brittle", json={"code": IDENTITY})
        assert fixed.json()["version"] == 2

        async def resolved() -> bool:
            return await issue("resolved") is not None

        await until(resolved, 30, interval=0.1, what="the transformation issue resolved")
        sent = await stack.send(owner, "jobs", b'{"id": "j6"}')
        (delivery,) = (await stack.event(owner, "jobs", sent, "success", 1))["deliveries"]
        assert delivery["transform"]["version"] == 2
        assert [r.body for r in stack.receiver.received(url)] == [b'{"id":"j6"}']

    async def test_another_owners_deliveries_go_on_while_one_owners_code_spins(
        self, stack: Stack
    ) -> None:
        spinner, other = await stack.dashboard.owner(), await stack.dashboard.owner()
        for owner, code in ((spinner, SPIN), (other, IDENTITY)):
            await transformation(owner, "t", code)
            await make(owner, "/webhooks", {"name": "w"})
            await make(owner, "/destinations", {"name": "d", "url": stack.receiver.url()})
            await make(
                owner, "/webhooks/w/routes", {"name": "r", "destination": "d", "transform": "t"}
            )
            await stack.routed(owner, "w", 1)

        spinning = [await stack.send(spinner, "w", b'{"n": %d}' % n) for n in range(4)]
        theirs = await stack.send(other, "w", b'{"n": 0}')
        await stack.event(other, "w", theirs, "success", 1)
        # the spinner's calls run one at a time on its half of the pool: when the other owner's
        # delivery is done, the spinner's last event is still waiting for its turn
        last = await stack.detail(spinner, "w", spinning[-1])
        assert last == {} or last["status"] == "pending", last
        for request_id in spinning:
            (delivery,) = (await stack.event(spinner, "w", request_id, "failed", 1))["deliveries"]
            assert delivery["status"] == "transform_failed"
            assert delivery["reason"].startswith("timeout: ")


class TestReferences:
    async def test_another_owners_transformation_is_unknown(self, stack: Stack) -> None:
        victim, owner = await stack.dashboard.owner(), await stack.dashboard.owner()
        await transformation(victim, "private-shape", IDENTITY)
        await transformation(owner, "mine", IDENTITY)
        await make(owner, "/webhooks", {"name": "w"})
        await make(owner, "/destinations", {"name": "d", "url": stack.receiver.url()})
        refused = await owner.client.post(
            "/api/v1/webhooks/w/routes",
            json={"name": "r", "destination": "d", "transform": "private-shape"},
        )
        assert refused.status_code == 422, refused.text
        (detail,) = refused.json()["detail"]
        assert detail["loc"] == ["body", "transform"]
        assert detail["type"] == "transformation_missing"
        assert "no transformation named 'private-shape'" in detail["msg"]

        await make(owner, "/webhooks/w/routes", {"name": "r", "destination": "d"})
        patched = await owner.client.patch(
            "/api/v1/webhooks/w/routes/r", json={"transform": "private-shape"}
        )
        assert patched.status_code == 422, patched.text
        dry = await owner.client.post(
            "/api/v1/webhooks/w/routes/r/dry-run", json={"route": {"transform": "private-shape"}}
        )
        assert dry.status_code == 422, dry.text
        assert dry.json()["detail"][0]["loc"] == ["body", "route", "transform"]
        mine = await owner.client.patch("/api/v1/webhooks/w/routes/r", json={"transform": "mine"})
        assert mine.json()["transform"] == "mine"

    async def test_deleting_a_transformation_in_use_is_409_naming_the_routes(
        self, stack: Stack
    ) -> None:
        owner = await stack.dashboard.owner()
        await transformation(owner, "shape", IDENTITY)
        await make(owner, "/webhooks", {"name": "w"})
        await make(owner, "/destinations", {"name": "d", "url": stack.receiver.url()})
        await make(
            owner, "/webhooks/w/routes", {"name": "r", "destination": "d", "transform": "shape"}
        )

        refused = await owner.client.delete("/api/v1/transformations/shape")
        assert refused.status_code == 409, refused.text
        assert refused.json()["routes"] == ["w/r"]
        assert "used by route(s) w/r" in refused.json()["message"]

        cleared = await owner.client.patch("/api/v1/webhooks/w/routes/r", json={"transform": None})
        assert cleared.json()["transform"] is None
        deleted = await owner.client.delete("/api/v1/transformations/shape")
        assert deleted.status_code == 204

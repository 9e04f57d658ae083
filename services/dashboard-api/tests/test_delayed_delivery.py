"""Delayed routes end to end on real services: a route's ``delay_s`` made through the API
reaches the router on the change log; its delivery waits in Kafka's delay tiers (hop by hop:
this forwarder's tiers are 1 s, 2 s and the installation's 10 s and up) while the webhook's other
routes, the same destination's other deliveries and another webhook deliver at once; it arrives
no sooner than its time, also across a forwarder restart; a replay waits again, a retry of the
one delivery does not."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from hookbay_common.clock import utcnow
from hookbay_common.settings import Settings
from hookbay_dashboard.settings import DashboardSettings
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.recorder import Recorder
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_ingest.app import create_app
from tests.support.dashboard import Owner, serve_dashboard
from tests.support.forwarder import forwarder_namespace, running
from tests.support.ingest import ingest_settings
from tests.support.receiver import Receiver, Reply
from tests.support.routed import RoutedStack, make
from tests.support.waiting import until

SCHEDULE = "0,1s,2s"
"""The forwarder's retry schedule: its delay tiers are 1 s and 2 s besides the installation's."""


@dataclass
class DelayStack:
    routed: RoutedStack
    settings: ForwarderSettings
    run: asyncio.Task[int]

    async def restart_forwarder(self) -> None:
        """Stop the forwarder (what it did not finish is not committed) and start another one
        on the same topics and consumer groups."""
        old = self.routed.forwarder
        old.request_stop()
        with contextlib.suppress(Exception):
            await self.run
        await old.stop()
        fresh = Forwarder(self.settings)
        await fresh.start()
        self.run = asyncio.create_task(fresh.run())
        self.routed.forwarder = fresh

    async def stop(self) -> None:
        self.routed.forwarder.request_stop()
        with contextlib.suppress(Exception):
            await self.run
        await self.routed.forwarder.stop()


@pytest.fixture(scope="module")
async def stack(
    settings: Settings, dashboard_settings: DashboardSettings, receiver: Receiver
) -> AsyncIterator[DelayStack]:
    fs = await forwarder_namespace(settings, retry_schedule=SCHEDULE)
    ds = dashboard_settings.model_copy(update={"kafka_namespace": fs.kafka_namespace})
    app = create_app(ingest_settings(settings, kafka_namespace=fs.kafka_namespace))
    forwarder = Forwarder(fs)
    async with (
        serve_dashboard(ds) as dashboard,
        running(Recorder(fs)),
        app.router.lifespan_context(app),
    ):
        ingest = app.state.ingest
        async with asyncio.timeout(30):
            await ingest.kafka_connected.wait()
            await ingest.view.following.wait()
        transport = httpx.ASGITransport(app=app, client=("198.51.100.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as intake:
            await forwarder.start()
            made = DelayStack(
                RoutedStack(dashboard, ingest, intake, receiver, forwarder), fs,
                asyncio.create_task(forwarder.run()),
            )  # fmt: skip
            try:
                yield made
            finally:
                await made.stop()


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def _delivery(
    owner: Owner, event_id: str, route: str, status: str, routings: int = 1
) -> dict[str, Any]:
    """The event's delivery over ``route`` in its ``routings``-th routing (a replay is one
    more), once it has ``status``."""
    found: dict[str, Any] = {}

    async def reached() -> bool:
        nonlocal found
        detail = (await owner.client.get(f"/api/v1/events/{event_id}")).json()
        mine = sorted((d for d in detail["deliveries"] if d["route"] == route),
                      key=lambda d: str(d["id"]))  # fmt: skip
        found = mine[-1] if len(mine) == routings else {}
        return bool(found.get("status") == status)

    try:
        await until(reached, 60, interval=0.1, what=f"{route} of {event_id} {status}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {found}") from None
    return found


class TestDelayedRoute:
    async def test_a_long_delay_waits_in_kafka_while_everything_else_delivers(
        self, stack: DelayStack
    ) -> None:
        routed = stack.routed
        owner = await routed.owner()
        now_url, later_url = routed.receiver.url(), routed.receiver.url()
        await make(owner, "/webhooks", {"name": "orders"})
        await make(owner, "/webhooks", {"name": "audit"})
        await make(owner, "/destinations", {"name": "now", "url": now_url})
        await make(owner, "/destinations", {"name": "later", "url": later_url,
                                            "max_concurrency": 1})  # fmt: skip
        created = await make(owner, "/webhooks/orders/routes",
                             {"name": "slow", "destination": "later", "delay_s": 3600})  # fmt: skip
        assert created["delay_s"] == 3600
        await make(owner, "/webhooks/orders/routes", {"name": "fast", "destination": "now"})
        await make(owner, "/webhooks/orders/routes", {"name": "same", "destination": "later"})
        await make(owner, "/webhooks/audit/routes", {"name": "copy", "destination": "later"})
        await routed.routed(owner, "orders")
        await routed.routed(owner, "audit")

        request_id = await routed.send(owner, "orders", b'{"n": 1}')
        waiting = await routed.event(owner, "orders", request_id, "pending", 3)
        fast = await _delivery(owner, waiting["id"], "fast", "success")
        same = await _delivery(owner, waiting["id"], "same", "success")
        other = await routed.send(owner, "audit", b'{"n": 2}')
        await routed.event(owner, "audit", other, "success", 1)

        slow = await _delivery(owner, waiting["id"], "slow", "scheduled")
        due = _at(waiting["created_at"]) + timedelta(hours=1)
        assert (
            slow["reason"] == f"delayed by the route until {due.isoformat(timespec='milliseconds')}"
        )
        assert slow["attempts"] == []
        assert (fast["attempts"][0]["status_code"], same["attempts"][0]["status_code"]) == (
            200,
            200,
        )
        assert len(routed.receiver.received(later_url)) == 2  # "same" and "copy", not "slow"
        later = await routed.forwarder.view.destination(owner.username, "later")
        assert later is not None
        snapshot = routed.forwarder.lanes.snapshot(later.id)
        assert snapshot is None or snapshot.waiting == 0  # in a delay tier, not in the lane

    async def test_a_short_delay_arrives_no_sooner_than_its_time(self, stack: DelayStack) -> None:
        routed = stack.routed
        owner = await routed.owner()
        url = routed.receiver.url()
        await make(owner, "/webhooks", {"name": "soon"})
        await make(owner, "/destinations", {"name": "svc", "url": url})
        await make(owner, "/webhooks/soon/routes",
                   {"name": "slow", "destination": "svc", "delay_s": 3})  # fmt: skip
        await make(owner, "/webhooks/soon/routes", {"name": "fast", "destination": "svc"})
        await routed.routed(owner, "soon")

        request_id = await routed.send(owner, "soon", b"{}")
        done = await routed.event(owner, "soon", request_id, "success", 2)
        by_route = {d["route"]: d for d in done["deliveries"]}
        (slow,), (fast,) = by_route["slow"]["attempts"], by_route["fast"]["attempts"]
        not_before = _at(done["created_at"]) + timedelta(seconds=3)
        assert _at(slow["started_at"]) >= not_before
        assert fast["status_code"] == 200
        assert (slow["trigger"], slow["number"], slow["status_code"]) == ("initial", 1, 200)
        assert len(routed.receiver.received(url)) == 2

    async def test_a_forwarder_restart_while_it_waits_still_delivers_it(
        self, stack: DelayStack
    ) -> None:
        routed = stack.routed
        owner = await routed.owner()
        url = routed.receiver.url()
        await make(owner, "/webhooks", {"name": "restarted"})
        await make(owner, "/destinations", {"name": "svc", "url": url})
        await make(owner, "/webhooks/restarted/routes",
                   {"name": "slow", "destination": "svc", "delay_s": 4})  # fmt: skip
        await routed.routed(owner, "restarted")

        request_id = await routed.send(owner, "restarted", b'{"kept": true}')
        waiting = await routed.event(owner, "restarted", request_id, "pending", 1)
        assert waiting["deliveries"][0]["status"] == "scheduled"
        await stack.restart_forwarder()

        done = await routed.event(owner, "restarted", request_id, "success", 1)
        attempts = done["deliveries"][0]["attempts"]
        not_before = _at(done["created_at"]) + timedelta(seconds=4)
        assert all(_at(a["started_at"]) >= not_before for a in attempts)
        assert {r.body for r in routed.receiver.received(url)} == {b'{"kept": true}'}

    async def test_a_replay_waits_again_and_a_retry_of_the_delivery_goes_at_once(
        self, stack: DelayStack
    ) -> None:
        routed = stack.routed
        owner = await routed.owner()
        url = routed.receiver.url(Reply(400, b"bad"), Reply(400, b"bad"))
        await make(owner, "/webhooks", {"name": "again"})
        await make(owner, "/destinations", {"name": "svc", "url": url})
        await make(owner, "/webhooks/again/routes",
                   {"name": "slow", "destination": "svc", "delay_s": 2})  # fmt: skip
        await routed.routed(owner, "again")
        request_id = await routed.send(owner, "again", b"{}")
        failed = await routed.event(owner, "again", request_id, "failed", 1)

        replayed_at = utcnow()
        replayed = await owner.client.post(f"/api/v1/events/{failed['id']}/replay")
        assert replayed.status_code == 202, replayed.text
        replay = await _delivery(owner, failed["id"], "slow", "failed", routings=2)
        (attempt,) = replay["attempts"]
        assert attempt["trigger"] == "replay"
        assert _at(attempt["started_at"]) >= replayed_at + timedelta(seconds=2)

        # a retry of the one delivery goes at once: with the route now delayed by a day, it
        # still arrives
        changed = await owner.client.patch(
            "/api/v1/webhooks/again/routes/slow", json={"delay_s": 86400}
        )
        assert (changed.status_code, changed.json()["delay_s"]) == (200, 86400)
        retried = await owner.client.post(f"/api/v1/deliveries/{replay['id']}/retry")
        assert retried.status_code == 202, retried.text
        done = await _delivery(owner, failed["id"], "slow", "success", routings=2)
        assert [a["status_code"] for a in done["attempts"]] == [400, 200]

"""A routed-delivery stack on real services for end-to-end tests: the dashboard API, ingest (in
process), a real forwarder and recorder on their own topic namespace, and a local receiver as
every destination."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from hookbay_common.settings import Settings
from hookbay_dashboard.settings import DashboardSettings
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.recorder import Recorder
from hookbay_ingest.app import Ingest, create_app
from tests.support.dashboard import Dashboard, Owner, serve_dashboard
from tests.support.dedupe import patient_deduplicator
from tests.support.forwarder import forwarder_namespace, running
from tests.support.ingest import ingest_settings
from tests.support.receiver import Receiver
from tests.support.waiting import until


@dataclass
class RoutedStack:
    dashboard: Dashboard
    ingest: Ingest
    intake: httpx.AsyncClient
    receiver: Receiver
    forwarder: Forwarder

    async def owner(self) -> Owner:
        return await self.dashboard.owner()

    async def send(
        self, owner: Owner, webhook: str, body: bytes, query: str = "",
        headers: dict[str, str] | None = None,
    ) -> str:  # fmt: skip
        """POST ``body`` to the webhook's intake URL, with ``query`` and ``headers`` if given
        (again after a 503); its request id."""
        path = f"/w/{owner.username}/{webhook}" + (f"?{query}" if query else "")
        answers: list[httpx.Response] = []
        headers = {"content-type": "application/json", **(headers or {})}

        async def answered() -> bool:  # a 503 (Kafka slow on a new topic) is sent again
            answers.append(await self.intake.post(path, content=body, headers=headers))
            return answers[-1].status_code != 503

        await until(answered, 60, interval=0.2, what=f"an answer to {path}")
        assert answers[-1].status_code == 200, answers[-1].text
        request_id: str = answers[-1].json()["requestId"]
        return request_id

    async def routed(self, owner: Owner, webhook: str) -> None:
        """Until ingest's view holds the webhook with its routes (the change log's delivery)."""

        async def seen() -> bool:
            hook = await self.ingest.view.webhook(owner.username, webhook)
            return hook is not None and bool(hook.routes)

        await until(seen, 30, interval=0.05, what=f"routes of {webhook} reach ingest")

    async def forwarder_sees(self, owner: Owner, destination: str, state: str) -> None:
        """Until the forwarder's routing view holds ``destination`` in ``state``."""

        async def seen() -> bool:
            found = await self.forwarder.view.destination(owner.username, destination)
            return found is not None and found.state.value == state

        await until(seen, 30, interval=0.05, what=f"the forwarder sees {destination} {state}")

    async def event(
        self, owner: Owner, webhook: str, request_id: str, status: str, deliveries: int
    ) -> dict[str, Any]:
        """The event, once it has ``status`` and ``deliveries`` deliveries, all finished when
        the status is."""
        found: dict[str, Any] = {}

        async def settled() -> bool:
            nonlocal found
            listing = await owner.client.get(
                f"/api/v1/webhooks/{webhook}/events", params={"request_id": request_id}
            )
            items = listing.json().get("items", []) if listing.status_code == 200 else []
            if not items:
                return False
            detail = await owner.client.get(f"/api/v1/events/{items[0]['id']}")
            found = detail.json()
            return bool(found["status"] == status and len(found["deliveries"]) == deliveries)

        try:
            await until(settled, 60, interval=0.1, what=f"event {request_id} {status}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last seen: {found}") from None
        return found

    async def quiet(self) -> None:
        """Every breaker transition so far is written, and every notification it caused sent."""
        await self.forwarder.health.idle()
        await self.forwarder.notifier.idle()


async def make(owner: Owner, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await owner.client.post(f"/api/v1{path}", json=body)
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()
    return made


def event_ids(receiver: Receiver, url: str) -> list[str]:
    """The event ids of what ``url`` received, in the order received."""
    return [r.header("x-hookbay-event-id") or "" for r in receiver.received(url)]


@contextlib.asynccontextmanager
async def routed_stack(
    settings: Settings, dashboard_settings: DashboardSettings, receiver: Receiver
) -> AsyncIterator[RoutedStack]:
    fs = await forwarder_namespace(settings)
    ds = dashboard_settings.model_copy(update={"kafka_namespace": fs.kafka_namespace})
    app = create_app(ingest_settings(settings, kafka_namespace=fs.kafka_namespace))
    forwarder = Forwarder(fs, deduplicator=patient_deduplicator)
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
            yield RoutedStack(dashboard, ingest, intake, receiver, forwarder)

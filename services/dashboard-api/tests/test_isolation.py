"""Tenant isolation as a matrix: every operation of the OpenAPI document that names a resource,
called by another owner with the first owner's resource, answers 404 and changes nothing.

The operations come from the served OpenAPI document, so an endpoint added later is in the
matrix without anyone remembering to add it (and a new kind of path parameter fails the test
until it is given a foreign value below)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from hookbay_common.alerts import new_secret
from hookbay_common.db.events import record_batch
from hookbay_common.models import DeliveryStatus, EventStatus, IssueType
from tests.support.dashboard import Dashboard, Owner
from tests.support.factories import create_delivery, create_event

PARAMETER = re.compile(r"\{(\w+)\}")
ADMIN_PREFIX = "/api/v1/admin/"


@dataclass
class Victim:
    owner: Owner
    values: dict[str, str]
    """A path parameter's name → the victim's resource."""


async def _victim(dashboard: Dashboard) -> Victim:
    owner = await dashboard.owner()
    response = await owner.client.post(
        "/api/v1/webhooks", json={"name": "orders", "forward_url": "http://127.0.0.1:9/in"}
    )
    hook = response.json()
    event = create_event(
        username=owner.username, webhook_id=hook["id"], webhook_name="orders",
        status=EventStatus.FAILED, forward_url="http://127.0.0.1:9/in",
    )  # fmt: skip
    await dashboard.runtime.events.upsert(event)
    delivery = create_delivery(  # an event with a delivery, failed as the event is
        event, route="to-billing", destination="billing", status=DeliveryStatus.FAILED
    )
    await record_batch(
        dashboard.runtime.events, dashboard.runtime.attempts, [], [], None, [delivery]
    )
    token = (await owner.client.post("/api/v1/tokens", json={"name": "victim"})).json()
    destination = await owner.client.post(
        "/api/v1/destinations", json={"name": "billing", "url": "http://127.0.0.1:9/b"}
    )
    assert destination.status_code == 201, destination.text
    route = await owner.client.post(
        "/api/v1/webhooks/orders/routes", json={"name": "to-billing", "destination": "billing"}
    )
    assert route.status_code == 201, route.text
    values = {
        "name": "orders", "event_id": event.id, "token_id": token["id"], "dest": "billing",
        "route": "to-billing", "delivery_id": delivery.id,
    }  # fmt: skip
    issue = await dashboard.runtime.services.issue_tracker().occurred(
        owner.username, IssueType.DELIVERY, destination="billing"
    )
    values["issue_id"] = issue.id
    channel = await owner.client.post(
        "/api/v1/alert-channels",
        json={"type": "webhook", "url": "http://127.0.0.1:9/alerts", "secret": new_secret()},
    )
    assert channel.status_code == 201, channel.text
    values["channel_id"] = channel.json()["id"]
    transformation = await owner.client.post(
        "/api/v1/transformations",
        json={"name": "shape", "code": "addHandler('transform', (r) => r)", "env": {"K": "v"}},
    )
    assert transformation.status_code == 201, transformation.text
    values["trf"] = "shape"
    job = await owner.client.post("/api/v1/webhooks/orders/events/replay", json={})
    if job.status_code == 202:
        values["job_id"] = job.json()["id"]
    return Victim(owner, values)


async def _operations(dashboard: Dashboard) -> list[tuple[str, str]]:
    async with dashboard.client() as client:
        document = (await client.get("/api/v1/openapi.json")).json()
    return [
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if PARAMETER.search(path) and not path.startswith(ADMIN_PREFIX)
    ]


BODIES: dict[str, dict[str, Any]] = {
    "/api/v1/events/{event_id}/attempts": {
        "session_id": "lst_isolation", "number": 1, "url": "http://localhost:3000/",
        "started_at": "2026-01-01T00:00:00Z", "status_code": 200,
    },
    "/api/v1/webhooks/{name}/routes": {"name": "intruder", "destination": "billing"},
    "/api/v1/transformations/{trf}/test": {"request": {}},
}  # fmt: skip
"""Valid bodies, where ``{}`` would be refused (422) before the owner is checked."""


async def _call(owner: Owner, method: str, path: str, template: str = "") -> int:
    body: dict[str, Any] | None = None
    if method in {"POST", "PATCH", "PUT"}:
        body = BODIES.get(template, {})
    async with owner.client.stream(method, path, json=body) as response:
        return response.status_code  # streams (SSE, exports) are not read: the status decides


class TestIsolation:
    async def test_every_operation_answers_404_to_another_owner(self, dashboard: Dashboard) -> None:
        victim = await _victim(dashboard)
        intruder = await dashboard.owner()
        operations = await _operations(dashboard)
        assert len(operations) >= 24, operations
        answers = {}
        for method, path in operations:
            names = PARAMETER.findall(path)
            missing = [n for n in names if n not in victim.values]
            assert not missing, f"{method} {path}: no foreign value for {missing}"
            concrete = PARAMETER.sub(lambda m: victim.values[m.group(1)], path)
            answers[f"{method} {path}"] = await _call(intruder, method, concrete, path)
        wrong = {operation: status for operation, status in answers.items() if status != 404}
        assert not wrong, wrong

        # and nothing of the victim's changed
        hook = (await victim.owner.client.get("/api/v1/webhooks/orders")).json()
        assert (hook["active"], hook["forward_url"]) == (True, "http://127.0.0.1:9/in")
        dest = (await victim.owner.client.get("/api/v1/destinations/billing")).json()
        assert (dest["state"], dest["url"]) == ("active", "http://127.0.0.1:9/b")
        routes = (await victim.owner.client.get("/api/v1/webhooks/orders/routes")).json()
        assert [(r["name"], r["destination"]) for r in routes] == [
            ("forward_url", "orders.forward_url"), ("to-billing", "billing"),
        ]  # fmt: skip
        shape = (await victim.owner.client.get("/api/v1/transformations/shape")).json()
        assert shape["version"] == 1
        tokens = (await victim.owner.client.get("/api/v1/tokens")).json()
        assert victim.values["token_id"] in {t["id"] for t in tokens}
        found = await dashboard.runtime.events.get_with_deliveries(victim.values["event_id"])
        assert found is not None
        assert [d.status for d in found[1]] == [DeliveryStatus.FAILED]

    async def test_same_names_of_another_owner_are_404_with_a_body(
        self, dashboard: Dashboard
    ) -> None:
        """The intruder's own webhook ``orders`` cannot reach the victim's destination, and a
        route of the intruder's cannot name it."""
        await _victim(dashboard)
        intruder = await dashboard.owner()
        await intruder.client.post("/api/v1/webhooks", json={"name": "orders"})
        route = await intruder.client.post(
            "/api/v1/webhooks/orders/routes", json={"name": "r", "destination": "billing"}
        )
        assert route.status_code == 422
        assert route.json()["detail"][0]["loc"] == ["body", "destination"]
        calls = [
            ("PATCH", "/api/v1/destinations/billing", {"timeout_s": 5}),
            ("POST", "/api/v1/destinations/billing/pause", None),
            ("POST", "/api/v1/destinations/billing/resume", None),
            ("DELETE", "/api/v1/destinations/billing", None),
            ("GET", "/api/v1/webhooks/orders/routes/to-billing", None),
            ("PATCH", "/api/v1/webhooks/orders/routes/to-billing", {"enabled": False}),
            ("DELETE", "/api/v1/webhooks/orders/routes/to-billing", None),
            ("POST", "/api/v1/webhooks/orders/routes/to-billing/dry-run", {"last": 5}),
        ]
        for method, path, body in calls:
            response = await intruder.client.request(method, path, json=body)
            assert response.status_code == 404, (method, path, response.text)

    @pytest.mark.parametrize(
        "path",
        ["/api/v1/webhooks", "/api/v1/tokens", "/api/v1/me", "/api/v1/destinations",
         "/api/v1/issues", "/api/v1/alert-channels", "/api/v1/transformations"],
    )  # fmt: skip
    async def test_lists_show_only_the_callers_own(self, dashboard: Dashboard, path: str) -> None:
        victim = await _victim(dashboard)
        intruder = await dashboard.owner()
        response = await intruder.client.get(path)
        assert response.status_code == 200
        for value in [victim.owner.username, *victim.values.values()]:
            if value != "orders":
                assert value not in response.text, (path, value)

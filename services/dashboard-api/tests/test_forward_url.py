"""A webhook's ``forward_url`` as one unfiltered route to a destination of its own, through the
dashboard API on the real store and change log: set, changed, removed and deleted with the
webhook; its route and its destination's URL changed only through the webhook; the
destination's other controls the owner's."""

from __future__ import annotations

import httpx

from hookbay_common.configlog import decode_change
from tests.support.dashboard import Dashboard, Owner
from tests.support.kafka import TopicReader

HOOKS = "/api/v1/webhooks"
DESTINATIONS = "/api/v1/destinations"
FIRST = "http://127.0.0.1:9/first"
SECOND = "http://127.0.0.1:9/second"


async def forwarding(dashboard: Dashboard, url: str = FIRST) -> Owner:
    owner = await dashboard.owner()
    response = await owner.client.post(HOOKS, json={"name": "orders", "forward_url": url})
    assert response.status_code == 201, response.text
    assert response.json()["forward_url"] == url
    return owner


async def routes(owner: Owner) -> list[tuple[str, str, bool, object]]:
    listed = (await owner.client.get(f"{HOOKS}/orders/routes")).json()
    return [(r["name"], r["destination"], r["enabled"], r["filter"]) for r in listed]


async def destination(owner: Owner) -> httpx.Response:
    return await owner.client.get(f"{DESTINATIONS}/orders.forward_url")


class TestSet:
    async def test_creation_makes_its_route_and_destination(self, dashboard: Dashboard) -> None:
        owner = await forwarding(dashboard)
        assert await routes(owner) == [("forward_url", "orders.forward_url", True, None)]
        made = (await destination(owner)).json()
        expected = {
            "name": "orders.forward_url", "url": FIRST, "timeout_s": 10, "retry_schedule": None,
            "rate_limit": None, "max_concurrency": 20, "state": "active", "headers": {},
        }  # fmt: skip
        assert {k: made[k] for k in expected} == expected

    async def test_set_later_goes_first_and_a_change_keeps_the_route(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        assert (await owner.client.post(HOOKS, json={"name": "orders"})).status_code == 201
        await owner.client.post(DESTINATIONS, json={"name": "billing", "url": FIRST})
        added = await owner.client.post(
            f"{HOOKS}/orders/routes", json={"name": "bill", "destination": "billing"}
        )
        assert added.status_code == 201
        set_ = await owner.client.patch(f"{HOOKS}/orders", json={"forward_url": FIRST})
        assert set_.status_code == 200
        route = (await owner.client.get(f"{HOOKS}/orders/routes/forward_url")).json()
        assert route["position"] == 0
        changed = await owner.client.patch(f"{HOOKS}/orders", json={"forward_url": SECOND})
        assert changed.json()["forward_url"] == SECOND
        assert (await destination(owner)).json()["url"] == SECOND
        again = (await owner.client.get(f"{HOOKS}/orders/routes/forward_url")).json()
        assert again["id"] == route["id"]  # the same route: its deliveries keep their ids
        assert [name for name, *_ in await routes(owner)] == ["forward_url", "bill"]

    async def test_removed_takes_route_and_destination_keeps_the_rest(
        self, dashboard: Dashboard
    ) -> None:
        owner = await forwarding(dashboard)
        await owner.client.post(DESTINATIONS, json={"name": "billing", "url": SECOND})
        await owner.client.post(
            f"{HOOKS}/orders/routes", json={"name": "bill", "destination": "billing"}
        )
        removed = await owner.client.patch(f"{HOOKS}/orders", json={"forward_url": None})
        assert removed.status_code == 200
        assert removed.json()["forward_url"] is None
        assert await routes(owner) == [("bill", "billing", True, None)]
        assert (await destination(owner)).status_code == 404

    async def test_deleting_the_webhook_deletes_its_destination(self, dashboard: Dashboard) -> None:
        owner = await forwarding(dashboard)
        assert (await owner.client.delete(f"{HOOKS}/orders")).status_code == 204
        assert (await destination(owner)).status_code == 404
        again = await owner.client.post(HOOKS, json={"name": "orders", "forward_url": SECOND})
        assert again.status_code == 201
        assert (await destination(owner)).json()["url"] == SECOND


class TestManaged:
    async def test_its_route_changes_only_through_the_webhook(self, dashboard: Dashboard) -> None:
        owner = await forwarding(dashboard)
        for response in (
            await owner.client.patch(f"{HOOKS}/orders/routes/forward_url", json={"enabled": False}),
            await owner.client.patch(
                f"{HOOKS}/orders/routes/forward_url",
                json={"dedupe": {"window_s": 60, "preset": "github"}},
            ),
            await owner.client.delete(f"{HOOKS}/orders/routes/forward_url"),
        ):
            assert response.status_code == 409, response.text
            body = response.json()
            assert body["error"] == "Managed by forward_url"
            assert "forward_url" in body["message"]
        assert await routes(owner) == [("forward_url", "orders.forward_url", True, None)]

    async def test_its_place_in_the_list_is_the_owners(self, dashboard: Dashboard) -> None:
        owner = await forwarding(dashboard)
        await owner.client.post(DESTINATIONS, json={"name": "billing", "url": SECOND})
        await owner.client.post(
            f"{HOOKS}/orders/routes", json={"name": "bill", "destination": "billing"}
        )
        moved = await owner.client.patch(f"{HOOKS}/orders/routes/forward_url", json={"position": 1})
        assert moved.status_code == 200, moved.text
        changed = await owner.client.patch(f"{HOOKS}/orders", json={"forward_url": SECOND})
        assert changed.status_code == 200
        assert [name for name, *_ in await routes(owner)] == ["bill", "forward_url"]

    async def test_its_url_changes_only_through_the_webhook(self, dashboard: Dashboard) -> None:
        owner = await forwarding(dashboard)
        path = f"{DESTINATIONS}/orders.forward_url"
        refused = await owner.client.patch(path, json={"url": SECOND})
        assert (refused.status_code, refused.json()["error"]) == (409, "Managed by forward_url")
        deleted = await owner.client.delete(path)
        assert (deleted.status_code, deleted.json()["error"]) == (409, "Managed by forward_url")
        assert (await destination(owner)).json()["url"] == FIRST

    async def test_its_controls_are_the_owners(self, dashboard: Dashboard) -> None:
        owner = await forwarding(dashboard)
        path = f"{DESTINATIONS}/orders.forward_url"
        body = {"url": FIRST, "max_concurrency": 1, "rate_limit": {"count": 5, "period": "second"}}
        changed = await owner.client.patch(path, json=body)
        assert changed.status_code == 200, changed.text
        assert (changed.json()["max_concurrency"], changed.json()["rate_limit"]["count"]) == (1, 5)
        paused = await owner.client.post(f"{path}/pause")
        assert (paused.status_code, paused.json()["state"]) == (200, "paused")
        moved = await owner.client.patch(f"{HOOKS}/orders", json={"forward_url": SECOND})
        assert moved.status_code == 200
        kept = (await destination(owner)).json()
        assert (kept["url"], kept["state"], kept["max_concurrency"]) == (SECOND, "paused", 1)

    async def test_no_other_route_delivers_to_it(self, dashboard: Dashboard) -> None:
        owner = await forwarding(dashboard)
        response = await owner.client.post(
            f"{HOOKS}/orders/routes", json={"name": "copy", "destination": "orders.forward_url"}
        )
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"] == ["body", "destination"]

    async def test_another_owner_cannot_reach_it(self, dashboard: Dashboard) -> None:
        owner = await forwarding(dashboard)
        intruder = await dashboard.owner()
        path = f"{DESTINATIONS}/orders.forward_url"
        assert (await intruder.client.get(path)).status_code == 404
        assert (await intruder.client.post(f"{path}/pause")).status_code == 404
        assert (await intruder.client.delete(path)).status_code == 404
        assert (await destination(owner)).json()["state"] == "active"


class TestChangeLog:
    async def test_destination_published_before_the_route_naming_it(
        self, dashboard: Dashboard
    ) -> None:
        owner = await forwarding(dashboard)
        wanted = {
            f"webhook:{owner.username}/orders".encode(),
            f"destination:{owner.username}/orders.forward_url".encode(),
        }
        reader = TopicReader(
            dashboard.settings.kafka_bootstrap, dashboard.settings.topics.config, bytes
        )
        await reader.start(from_beginning=True)
        try:
            records = [m for m in await reader.to_end() if m.key in wanted]
        finally:
            await reader.stop()
        changes = [decode_change(m.value, dashboard.runtime.box) for m in records]
        kinds = [
            "webhook" if c.webhook is not None and c.webhook.routes else
            "destination" if c.destination is not None else "bare webhook"
            for c in changes
        ]  # fmt: skip
        assert kinds.index("destination") < kinds.index("webhook")
        latest = changes[-1].webhook
        assert latest is not None
        assert latest.forward_url == FIRST
        assert [r.name for r in latest.routes] == ["forward_url"]

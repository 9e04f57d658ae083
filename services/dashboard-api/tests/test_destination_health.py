"""Destination health end to end on real services (Kafka, the store, a real forwarder and
recorder, a local destination): what the destination holds and its last errors through
``GET /destinations/{dest}/health``, only to its owner; a 410 disabling the destination with an
issue and a signed notification; acknowledged and ignored issues staying quiet when the breaker
opens again, resolved ones reopening (silently within the damping window, aloud after it)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from hookbay_common.alerts import IssueTracker, new_secret
from hookbay_common.clock import utcnow
from hookbay_common.models import IssueType
from hookbay_common.settings import Settings
from hookbay_dashboard.settings import DashboardSettings
from tests.support.dashboard import Owner
from tests.support.receiver import Receiver, Reply
from tests.support.routed import RoutedStack, event_ids, make, routed_stack
from tests.support.waiting import until

STAYS_OPEN = {"consecutive": 2, "cooldown_s": 3600, "max_cooldown_s": 3600}
"""Opens after two failures and probes only an hour later: what it holds stays held."""
PROBES_AT_ONCE = {"consecutive": 2, "cooldown_s": 1, "max_cooldown_s": 1, "disable_after_s": 60}
"""Opens after two failures and probes a held delivery a second later."""


@pytest.fixture(scope="module")
async def stack(
    settings: Settings, dashboard_settings: DashboardSettings, receiver: Receiver
) -> AsyncIterator[RoutedStack]:
    async with routed_stack(settings, dashboard_settings, receiver) as routed:
        yield routed


async def delivering(
    stack: RoutedStack, owner: Owner, name: str, url: str, breaker: dict[str, int]
) -> None:
    """Webhook ``name`` routed to destination ``name`` at ``url``: one attempt at a time, no
    retries, with ``breaker``'s thresholds."""
    await make(owner, "/webhooks", {"name": name})
    await make(owner, "/destinations", {
        "name": name, "url": url, "max_concurrency": 1, "retry_schedule": ["0"],
        "breaker": breaker,
    })  # fmt: skip
    await make(owner, f"/webhooks/{name}/routes", {"name": "only", "destination": name})
    await stack.routed(owner, name)


async def send(stack: RoutedStack, owner: Owner, webhook: str, count: int) -> None:
    for n in range(count):
        await stack.send(owner, webhook, json.dumps({"n": n}).encode())


async def alert_channel(owner: Owner, url: str) -> str:
    """A signed webhook channel to ``url``; its secret."""
    secret = new_secret()
    await make(owner, "/alert-channels", {"type": "webhook", "url": url, "secret": secret})
    return secret


def told(receiver: Receiver, url: str, secret: str) -> list[dict[str, Any]]:
    """The notifications the channel at ``url`` received, each checked against its signature."""
    verifier = Webhook(secret)
    bodies = []
    for sent in receiver.received(url):
        headers = {k.decode(): v.decode() for k, v in sent.headers}
        bodies.append(verifier.verify(sent.body, headers))
    return bodies


async def issue_when(owner: Owner, type_: str, destination: str, **expected: Any) -> dict[str, Any]:
    """The issue, once it has the ``expected`` fields."""
    seen: dict[str, Any] = {}

    async def there() -> bool:
        nonlocal seen
        issues = (await owner.client.get("/api/v1/issues")).json()
        found = [i for i in issues if (i["type"], i["destination"]) == (type_, destination)]
        seen = found[0] if found else {}
        return bool(found) and all(seen[k] == v for k, v in expected.items())

    await until(there, 30, interval=0.05, what=f"the {type_} issue of {destination}: {expected}")
    return seen


async def state_when(owner: Owner, destination: str, state: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def there() -> bool:
        nonlocal seen
        seen = (await owner.client.get(f"/api/v1/destinations/{destination}")).json()
        return bool(seen["state"] == state)

    await until(there, 30, interval=0.05, what=f"{destination} {state}")
    return seen


async def told_when(receiver: Receiver, url: str, secret: str, count: int) -> list[str]:
    await receiver.wait_for(url, count)
    return [n["type"] for n in told(receiver, url, secret)]


class TestHealthFigures:
    async def test_what_is_held_and_the_last_errors_shown_to_their_owner_only(
        self, stack: RoutedStack
    ) -> None:
        owner, other = await stack.owner(), await stack.owner()
        url = stack.receiver.url(then=Reply(503))
        await delivering(stack, owner, "stuck", url, STAYS_OPEN)
        await send(stack, owner, "stuck", 5)  # two fail and open the breaker; three are held
        health: dict[str, Any] = {}

        async def settled() -> bool:
            nonlocal health
            health = (await owner.client.get("/api/v1/destinations/stuck/health")).json()
            return bool(health["held"] == 3 and len(health["last_errors"]) == 2)

        await until(settled, 60, interval=0.1, what="three held, two errors")
        failed = event_ids(stack.receiver, url)
        assert len(failed) == 2
        errors = health["last_errors"]
        assert [e["event_id"] for e in errors] == failed[::-1]  # newest first
        assert [(e["status_code"], e["error"]) for e in errors] == [(503, None)] * 2
        assert errors[0]["at"] >= errors[1]["at"]
        assert health["oldest_held_at"] is not None
        assert health["oldest_held_at"] >= errors[0]["at"]
        issue = await issue_when(owner, "delivery", "stuck")
        assert issue["sample_event_id"] == failed[1]  # the attempt that tripped the breaker

        hidden = await other.client.get("/api/v1/destinations/stuck/health")
        assert hidden.status_code == 404
        await make(other, "/destinations", {"name": "stuck", "url": stack.receiver.url()})
        theirs = (await other.client.get("/api/v1/destinations/stuck/health")).json()
        assert theirs == {"held": 0, "oldest_held_at": None, "last_errors": []}

    async def test_a_new_destination_of_an_earlier_ones_name_starts_without_errors(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        url = stack.receiver.url(then=Reply(500))
        await delivering(stack, owner, "again", url, {"consecutive": 100})
        await send(stack, owner, "again", 1)

        async def failed() -> bool:
            health = (await owner.client.get("/api/v1/destinations/again/health")).json()
            return len(health["last_errors"]) == 1

        await until(failed, 60, interval=0.1, what="the error recorded")
        response = await owner.client.delete("/api/v1/webhooks/again/routes/only")
        assert response.status_code == 204, response.text
        assert (await owner.client.delete("/api/v1/destinations/again")).status_code == 204
        await make(owner, "/destinations", {"name": "again", "url": url})
        fresh = (await owner.client.get("/api/v1/destinations/again/health")).json()
        assert fresh == {"held": 0, "oldest_held_at": None, "last_errors": []}


class TestGone:
    async def test_a_410_disables_it_opens_an_issue_and_tells_the_channel(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        inbox = stack.receiver.url()
        secret = await alert_channel(owner, inbox)
        url = stack.receiver.url(then=Reply(410))
        await delivering(stack, owner, "moved", url, {})
        await send(stack, owner, "moved", 1)

        disabled = await state_when(owner, "moved", "disabled")
        assert disabled["state_reason"] == "gone"
        [gone] = event_ids(stack.receiver, url)
        issue = await issue_when(owner, "disabled", "moved", status="open")
        assert (issue["reason"], issue["sample_event_id"], issue["count"]) == ("gone", gone, 1)
        assert await told_when(stack.receiver, inbox, secret, 1) == ["issue.opened"]
        [notification] = told(stack.receiver, inbox, secret)
        assert {k: notification["issue"][k] for k in ("id", "type", "destination")} == {
            "id": issue["id"], "type": "disabled", "destination": "moved",
        }  # fmt: skip
        health = (await owner.client.get("/api/v1/destinations/moved/health")).json()
        assert [(e["event_id"], e["status_code"]) for e in health["last_errors"]] == [(gone, 410)]


class TestQuietIssues:
    async def test_an_acknowledged_issue_counts_silently_and_resolves_aloud(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        inbox = stack.receiver.url()
        secret = await alert_channel(owner, inbox)
        url = stack.receiver.url(Reply(503), Reply(503), Reply(503), then=Reply(200))
        await delivering(stack, owner, "acked", url, PROBES_AT_ONCE)
        await send(stack, owner, "acked", 2)
        issue = await issue_when(owner, "delivery", "acked", status="open")
        assert await told_when(stack.receiver, inbox, secret, 1) == ["issue.opened"]
        acked = await owner.client.post(f"/api/v1/issues/{issue['id']}/acknowledge")
        assert acked.json()["status"] == "acknowledged"

        await send(stack, owner, "acked", 1)  # held; its probe fails: the breaker opens again
        await issue_when(owner, "delivery", "acked", count=2, status="acknowledged")
        await stack.quiet()
        assert [n["type"] for n in told(stack.receiver, inbox, secret)] == ["issue.opened"]

        await send(stack, owner, "acked", 1)  # its probe succeeds: the breaker closes
        await issue_when(owner, "delivery", "acked", status="resolved")
        assert await told_when(stack.receiver, inbox, secret, 2) == [
            "issue.opened", "issue.resolved",
        ]  # fmt: skip

    async def test_an_ignored_issue_stays_quiet_when_the_breaker_trips_again(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        inbox = stack.receiver.url()
        secret = await alert_channel(owner, inbox)
        url = stack.receiver.url(
            Reply(503), Reply(503), Reply(200), Reply(503), Reply(503), then=Reply(200)
        )
        await delivering(stack, owner, "ignored", url, PROBES_AT_ONCE)
        await send(stack, owner, "ignored", 2)
        issue = await issue_when(owner, "delivery", "ignored", status="open")
        assert await told_when(stack.receiver, inbox, secret, 1) == ["issue.opened"]
        response = await owner.client.post(f"/api/v1/issues/{issue['id']}/ignore")
        assert response.json()["status"] == "ignored"

        await send(stack, owner, "ignored", 1)  # held; its probe succeeds: closed
        await state_when(owner, "ignored", "active")
        await send(stack, owner, "ignored", 2)  # two more failures: the breaker trips again
        again = await issue_when(owner, "delivery", "ignored", count=2)
        assert again["status"] == "ignored"
        await stack.quiet()
        assert [n["type"] for n in told(stack.receiver, inbox, secret)] == ["issue.opened"]

    async def test_a_resolved_issue_reopens_silently_within_the_damping_window(
        self, stack: RoutedStack
    ) -> None:
        owner = await stack.owner()
        inbox = stack.receiver.url()
        secret = await alert_channel(owner, inbox)
        url = stack.receiver.url(
            Reply(503), Reply(503), Reply(200), Reply(503), Reply(503), then=Reply(200)
        )
        await delivering(stack, owner, "flaps", url, PROBES_AT_ONCE)
        await send(stack, owner, "flaps", 2)
        await issue_when(owner, "delivery", "flaps", status="open")
        await send(stack, owner, "flaps", 1)  # its probe succeeds: closed, the issue resolved
        await issue_when(owner, "delivery", "flaps", status="resolved")
        assert await told_when(stack.receiver, inbox, secret, 2) == [
            "issue.opened", "issue.resolved",
        ]  # fmt: skip

        await send(stack, owner, "flaps", 2)  # the breaker trips again
        reopened = await issue_when(owner, "delivery", "flaps", status="open", count=2)
        assert reopened["resolved_at"] is None
        await stack.quiet()
        assert [n["type"] for n in told(stack.receiver, inbox, secret)] == [
            "issue.opened", "issue.resolved",
        ]  # fmt: skip

    async def test_a_resolved_issue_reopens_aloud_after_the_damping_window(
        self, stack: RoutedStack
    ) -> None:
        """The issue's history made on a clock 15 minutes back (the channels heard
        *resolved* then); the real forwarder's breaker trips now."""
        owner = await stack.owner()
        inbox = stack.receiver.url()
        secret = await alert_channel(owner, inbox)
        back = utcnow() - timedelta(minutes=15)
        earlier = IssueTracker(stack.dashboard.runtime.services.stores.issues, None,
                               now=lambda: back)  # fmt: skip
        await earlier.occurred(owner.username, IssueType.DELIVERY, destination="late",
                               reason="breaker")  # fmt: skip
        await earlier.clear(owner.username, IssueType.DELIVERY, destination="late")
        url = stack.receiver.url(then=Reply(503))
        await delivering(stack, owner, "late", url, STAYS_OPEN)
        await send(stack, owner, "late", 2)

        reopened = await issue_when(owner, "delivery", "late", status="open", count=2)
        assert reopened["sample_event_id"] == event_ids(stack.receiver, url)[1]
        assert await told_when(stack.receiver, inbox, secret, 1) == ["issue.reopened"]
        [notification] = told(stack.receiver, inbox, secret)
        assert notification["issue"]["id"] == reopened["id"]

"""/issues and /alert-channels on the real store, a channel's test sent to a real local sink;
another owner's issue or channel is a 404 on every route; bad input a 422 naming the field;
the destination's breaker thresholds and state."""

from __future__ import annotations

import json
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from hookbay_common.alerts import new_secret
from hookbay_common.models import IssueType
from tests.support.dashboard import Dashboard, Owner
from tests.support.receiver import Receiver, Reply


async def open_issue(dashboard: Dashboard, owner: Owner, destination: str = "billing") -> str:
    tracker = dashboard.runtime.services.issue_tracker()
    issue = await tracker.occurred(
        owner.username, IssueType.DELIVERY, destination=destination, event_id="evt_x",
        reason="breaker",
    )  # fmt: skip
    return issue.id


async def webhook_channel(owner: Owner, url: str, secret: str | None = None) -> dict[str, Any]:
    body = {"type": "webhook", "url": url, "secret": secret or new_secret()}
    response = await owner.client.post("/api/v1/alert-channels", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


class TestIssues:
    async def test_listed_by_status_and_moved_by_their_owner(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        issue_id = await open_issue(dashboard, owner)
        listed = (await owner.client.get("/api/v1/issues", params={"status": "open"})).json()
        assert [i["id"] for i in listed] == [issue_id]
        expected = {"type": "delivery", "status": "open", "destination": "billing",
                    "transformation": None, "count": 1, "sample_event_id": "evt_x",
                    "resolved_at": None, "reason": "breaker"}  # fmt: skip
        assert {k: listed[0][k] for k in expected} == expected
        for key in ("first_seen_at", "last_seen_at", "opened_at"):
            assert listed[0][key].endswith("Z")

        acked = await owner.client.post(f"/api/v1/issues/{issue_id}/acknowledge")
        assert acked.json()["status"] == "acknowledged"
        assert (await owner.client.get("/api/v1/issues", params={"status": "open"})).json() == []
        resolved = (await owner.client.post(f"/api/v1/issues/{issue_id}/resolve")).json()
        assert resolved["status"] == "resolved"
        assert resolved["resolved_at"] is not None
        again = await owner.client.post(f"/api/v1/issues/{issue_id}/acknowledge")
        assert again.status_code == 409
        ignored = (await owner.client.post(f"/api/v1/issues/{issue_id}/ignore")).json()
        assert ignored["status"] == "ignored"
        everything = (await owner.client.get("/api/v1/issues")).json()
        assert [i["status"] for i in everything] == ["ignored"]

    async def test_a_status_that_does_not_exist_is_422(self, dashboard: Dashboard) -> None:
        owner = await dashboard.owner()
        response = await owner.client.get("/api/v1/issues", params={"status": "closed"})
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["query", "status"]


class TestAlertChannels:
    async def test_created_listed_with_secrets_masked_and_deleted(
        self, dashboard: Dashboard, receiver: Receiver
    ) -> None:
        owner = await dashboard.owner()
        secret = new_secret()
        hook = await webhook_channel(owner, receiver.url(), secret)
        assert hook["id"].startswith("ach_")
        assert (hook["secret"], hook["failing_since"], hook["last_error"]) == (
            "********", None, None,
        )  # fmt: skip
        slack = await owner.client.post(
            "/api/v1/alert-channels",
            json={"type": "slack", "url": "http://127.0.0.1:9/services/T0/B0/s3cr3t-path"},
        )
        pd = await owner.client.post(
            "/api/v1/alert-channels", json={"type": "pagerduty", "routing_key": "pd-s3cr3t-key"}
        )
        assert (slack.status_code, pd.status_code) == (201, 201)
        assert slack.json()["url"] == "http://127.0.0.1:9/********"
        assert (pd.json()["routing_key"], pd.json()["events_url"]) == ("********", None)
        listing = await owner.client.get("/api/v1/alert-channels")
        assert len(listing.json()) == 3
        for leaked in (secret, "s3cr3t-path", "pd-s3cr3t-key"):
            assert leaked not in listing.text + slack.text + pd.text
        stored = await dashboard.runtime.db.alert_channels.find_one({"_id": hook["id"]})
        assert stored is not None
        assert secret not in str(stored)  # sealed at rest
        deleted = await owner.client.delete(f"/api/v1/alert-channels/{hook['id']}")
        assert deleted.status_code == 204
        assert len((await owner.client.get("/api/v1/alert-channels")).json()) == 2

    async def test_the_test_sends_a_signed_notification(
        self, dashboard: Dashboard, receiver: Receiver
    ) -> None:
        owner = await dashboard.owner()
        url, secret = receiver.url(), new_secret()
        hook = await webhook_channel(owner, url, secret)
        result = await owner.client.post(f"/api/v1/alert-channels/{hook['id']}/test")
        assert result.json() == {"sent": True, "error": None}
        (got,) = receiver.received(url)
        payload = Webhook(secret).verify(got.body, {k.decode(): v.decode() for k, v in got.headers})
        assert (payload["type"], payload["test"]) == ("issue.opened", True)
        assert json.loads(got.body)["issue"]["destination"] == "example"

    async def test_a_failing_test_is_reported_and_marks_the_channel(
        self, dashboard: Dashboard, receiver: Receiver
    ) -> None:
        owner = await dashboard.owner()
        hook = await webhook_channel(owner, receiver.url(then=Reply(502)))
        result = await owner.client.post(f"/api/v1/alert-channels/{hook['id']}/test")
        assert result.json() == {"sent": False, "error": "answered 502"}
        (listed,) = (await owner.client.get("/api/v1/alert-channels")).json()
        assert listed["last_error"] == "answered 502"
        assert listed["failing_since"] is not None

    @pytest.mark.parametrize(
        ("body", "loc", "fragment"),
        [
            ({"type": "webhook", "secret": "whsec_" + "A" * 40}, ["body", "url"], "needs url"),
            ({"type": "webhook", "url": "http://127.0.0.1:9/"}, ["body", "secret"], "needs secret"),
            ({"type": "webhook", "url": "http://127.0.0.1:9/", "secret": "plain"},
             ["body", "secret"], "whsec_"),
            ({"type": "webhook", "url": "ftp://example.com/", "secret": new_secret()},
             ["body", "url"], "http"),
            ({"type": "slack", "url": "http://127.0.0.1:9/", "secret": new_secret()},
             ["body", "secret"], "takes no secret"),
            ({"type": "pagerduty"}, ["body", "routing_key"], "needs routing_key"),
            ({"type": "pagerduty", "routing_key": "k", "events_url": "gopher://x/"},
             ["body", "events_url"], "http"),
            ({"type": "email", "to": "ops@example.com"}, ["body", "type"], "SMTP"),
            ({"type": "email", "to": "not an address"}, ["body", "to"], "email address"),
            ({"type": "teams", "url": "http://127.0.0.1:9/"}, ["body", "type"], "Input should be"),
            ({"type": "slack", "url": "http://127.0.0.1:9/", "extra": 1}, ["body", "extra"],
             "Extra inputs"),
        ],
    )  # fmt: skip
    async def test_bad_input_is_422_naming_the_field(
        self, dashboard: Dashboard, body: dict[str, Any], loc: list[str], fragment: str
    ) -> None:
        owner = await dashboard.owner()
        response = await owner.client.post("/api/v1/alert-channels", json=body)
        assert response.status_code == 422, response.text
        detail = response.json()["detail"]
        assert detail[0]["loc"] == loc
        assert fragment in detail[0]["msg"]
        assert "whsec_" + "A" * 40 not in response.text


class TestIsolation:
    async def test_another_owners_issue_and_channel_are_404_everywhere(
        self, dashboard: Dashboard, receiver: Receiver
    ) -> None:
        owner, other = await dashboard.owner(), await dashboard.owner()
        issue_id = await open_issue(dashboard, owner)
        channel = await webhook_channel(owner, receiver.url())
        calls = [
            ("GET", f"/api/v1/issues/{issue_id}"),
            ("POST", f"/api/v1/issues/{issue_id}/acknowledge"),
            ("POST", f"/api/v1/issues/{issue_id}/resolve"),
            ("POST", f"/api/v1/issues/{issue_id}/ignore"),
            ("GET", f"/api/v1/alert-channels/{channel['id']}"),
            ("POST", f"/api/v1/alert-channels/{channel['id']}/test"),
            ("DELETE", f"/api/v1/alert-channels/{channel['id']}"),
        ]
        for method, path in calls:
            response = await other.client.request(method, path)
            assert response.status_code == 404, (method, path, response.text)
        assert (await other.client.get("/api/v1/issues")).json() == []
        assert (await other.client.get("/api/v1/alert-channels")).json() == []
        assert receiver.received(channel["url"]) == []
        mine = (await owner.client.get(f"/api/v1/issues/{issue_id}")).json()
        assert mine["status"] == "open"


class TestDestinationBreaker:
    async def test_defaults_then_thresholds_set_and_state_read_only(
        self, dashboard: Dashboard
    ) -> None:
        owner = await dashboard.owner()
        created = await owner.client.post(
            "/api/v1/destinations", json={"name": "billing", "url": "http://127.0.0.1:9/in"}
        )
        assert created.json()["breaker"] == {
            "state": "closed", "window_s": 120, "min_attempts": 10, "failure_pct": 70,
            "consecutive": 20, "cooldown_s": 30, "max_cooldown_s": 1800,
            "disable_after_s": 259200, "opened_at": None, "next_probe_at": None,
        }  # fmt: skip
        changed = await owner.client.patch(
            "/api/v1/destinations/billing",
            json={"breaker": {"failure_pct": 50, "disable_after_s": 3600}},
        )
        assert changed.status_code == 200, changed.text
        breaker = changed.json()["breaker"]
        assert (breaker["failure_pct"], breaker["disable_after_s"], breaker["window_s"]) == (
            50, 3600, 120,
        )  # fmt: skip
        refused = await owner.client.patch(
            "/api/v1/destinations/billing", json={"breaker": {"state": "open"}}
        )
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"] == ["body", "breaker", "state"]
        contradiction = await owner.client.patch(
            "/api/v1/destinations/billing", json={"breaker": {"cooldown_s": 3600}}
        )
        assert contradiction.status_code == 422
        assert contradiction.json()["detail"][0]["loc"] == ["body", "breaker", "cooldown_s"]


class TestOwnerDeleted:
    async def test_their_issues_and_channels_go_with_the_account(
        self, dashboard: Dashboard, receiver: Receiver
    ) -> None:
        admin, owner, other = (
            await dashboard.owner(admin=True), await dashboard.owner(), await dashboard.owner(),
        )  # fmt: skip
        url = receiver.url()
        for someone in (owner, other):
            await open_issue(dashboard, someone)
            await webhook_channel(someone, url)

        response = await admin.client.delete(f"/api/v1/admin/users/{owner.username}")

        assert response.status_code == 204
        db = dashboard.runtime.db
        for collection in ("issues", "alert_channels"):
            assert await db[collection].count_documents({"username": owner.username}) == 0
            assert await db[collection].count_documents({"username": other.username}) == 1

"""``hookbay destination ...`` and ``hookbay route ...`` as an owner runs them, against the real
dashboard API: every verb, the API's refusals as one line, another owner's names exit 2."""

from __future__ import annotations

import json

import pytest

from hookbay_common.clock import utcnow
from hookbay_common.db.events import PendingSummaries, record_batch
from hookbay_common.models import DeliveryStatus
from tests.support.dashboard import Dashboard, Owner
from tests.support.factories import create_delivery, create_event, create_route, create_webhook

from .running import ok, ok_json
from .test_main import hookbay


class TestDestination:
    async def test_every_verb(self, owner_env: dict[str, str]) -> None:
        created = await ok_json(
            "destination", "create", "billing", "--url", "http://127.0.0.1:9/b",
            "--header", "Authorization: Bearer owner-cli-secret", "--rate", "5/second",
            "--retry-schedule", "0,10s", "--max-concurrency", "1", "--timeout", "20", env=owner_env,
        )  # fmt: skip
        assert created["headers"] == {"authorization": "********"}
        assert (created["rate_limit"], created["retry_schedule"]) == (
            {"count": 5, "period": "second"}, ["0", "10s"],
        )  # fmt: skip
        assert (created["max_concurrency"], created["timeout_s"]) == (1, 20)
        listed = await ok("destination", "list", env=owner_env)
        assert listed.splitlines()[1].split()[:3] == ["billing", "active", "-"]
        shown = await ok("destination", "show", "billing", env=owner_env)
        assert "authorization': '********'" in shown
        assert "owner-cli-secret" not in shown
        changed = await ok_json(
            "destination", "set", "billing", "--no-rate", "--default-retry-schedule",
            "--header", "Authorization: ********", "--header", "X-Team: core", env=owner_env,
        )  # fmt: skip
        assert (changed["rate_limit"], changed["retry_schedule"]) == (None, None)
        assert changed["headers"] == {"authorization": "********", "x-team": "********"}
        paused = await ok("destination", "pause", "billing", env=owner_env)
        assert paused.strip() == "billing: http://127.0.0.1:9/b (paused, manual)"
        resumed = await ok_json("destination", "resume", "billing", env=owner_env)
        assert resumed["state"] == "active"
        assert (await ok("destination", "delete", "billing", env=owner_env)).strip() == (
            "deleted destination billing"
        )
        assert await ok_json("destination", "list", env=owner_env) == []

    @pytest.mark.parametrize(
        ("args", "message", "code"),
        [
            (["create", "Bad", "--url", "http://127.0.0.1:9/"], "name: invalid name", 1),
            (["create", "x", "--url", "ftp://h/"], "url: forward URL must start", 1),
            (["create", "x", "--url", "http://h/", "--header", "Host: h"], "set by hookbay", 1),
            (["create", "x", "--url", "http://h/", "--rate", "fast"], "COUNT/PERIOD", 2),
            (["create", "x", "--url", "http://h/", "--retry-schedule", "soon"],
             "not a duration", 1),
            (["set", "x"], "nothing to change", 2),
            (["show", "nope"], "no destination named 'nope'", 2),
            (["pause", "nope"], "no destination named 'nope'", 2),
        ],
    )  # fmt: skip
    async def test_refusals(
        self, owner_env: dict[str, str], args: list[str], message: str, code: int
    ) -> None:
        status, _, err = await hookbay("destination", *args, env=owner_env)
        assert status == code, err
        assert message in err
        assert "Traceback" not in err


class TestRoute:
    async def test_every_verb(
        self, cli_dashboard: Dashboard, owner: Owner, owner_env: dict[str, str]
    ) -> None:
        webhook = await cli_dashboard.runtime.webhooks.create(
            create_webhook(username=owner.username, name="orders")
        )
        await ok("destination", "create", "billing", "--url", "http://127.0.0.1:9/b", env=owner_env)
        spec = {"body": {"type": "paid"}}
        created = await ok_json(
            "route", "create", "orders", "paid", "--destination", "billing",
            "--filter", json.dumps(spec), env=owner_env,
        )  # fmt: skip
        assert (created["filter"], created["position"]) == (spec, 0)
        first = await ok(
            "route", "create", "orders", "all", "--destination", "billing", "--position", "0",
            "--filter-file", "-", "--disabled", env=owner_env, stdin="null",
        )  # fmt: skip
        assert first.strip() == "created route orders/all → billing (position 0, disabled)"
        listed = await ok("route", "list", "orders", env=owner_env)
        assert [line.split()[1] for line in listed.splitlines()[1:]] == ["all", "paid"]
        moved = await ok_json(
            "route", "set", "orders", "all", "--position", "1", "--enable", env=owner_env
        )
        assert (moved["position"], moved["enabled"]) == (1, True)
        assert "destination: billing" in await ok("route", "show", "orders", "all", env=owner_env)
        event = create_event(
            username=owner.username, webhook_id=webhook.id, webhook_name="orders",
            created_at=utcnow(),
        )  # fmt: skip
        await cli_dashboard.runtime.events.upsert(event)
        run = await ok_json("route", "dry-run", "orders", "all", "--last", "5", env=owner_env)
        assert [(e["event_id"], e["matched"]) for e in run["events"]] == [(event.id, True)]
        text = await ok("route", "dry-run", "orders", "proposal", "--filter", "null", env=owner_env)
        assert text.strip().endswith("1 of 1 matched; nothing was delivered")
        assert (await ok("route", "delete", "orders", "all", env=owner_env)).strip() == (
            "deleted route orders/all"
        )
        assert [r["name"] for r in await ok_json("route", "list", "orders", env=owner_env)] == [
            "paid"
        ]
        code, _, err = await hookbay("destination", "delete", "billing", env=owner_env)
        assert code == 1
        assert "used by route(s) orders/paid" in err

    async def test_a_route_runs_a_transformation(
        self, cli_dashboard: Dashboard, owner: Owner, owner_env: dict[str, str]
    ) -> None:
        webhook = await cli_dashboard.runtime.webhooks.create(
            create_webhook(username=owner.username, name="orders")
        )
        await ok("destination", "create", "erp", "--url", "http://127.0.0.1:9/e", env=owner_env)
        code = "addHandler('transform', (r) => { r.body = {n: r.body.id}; return r; });"
        await ok("transformation", "create", "shape", "--code", "-", env=owner_env, stdin=code)
        created = await ok(
            "route", "create", "orders", "r", "--destination", "erp", "--transform", "shape",
            env=owner_env,
        )  # fmt: skip
        assert created.strip() == "created route orders/r via shape → erp (position 0)"
        event = create_event(
            username=owner.username, webhook_id=webhook.id, webhook_name="orders",
            body=b'{"id": 4}', created_at=utcnow(),
        )  # fmt: skip
        await cli_dashboard.runtime.events.upsert(event)
        run = await ok_json("route", "dry-run", "orders", "r", env=owner_env)
        assert run["events"][0]["transform"]["request"]["body"] == {"n": 4}
        text = await ok("route", "dry-run", "orders", "r", env=owner_env)
        assert text.splitlines()[1].split()[-2:] == ["-", "ok"], text
        status, _, err = await hookbay("transformation", "delete", "shape", env=owner_env)
        assert (status, "used by route(s) orders/r" in err) == (1, True), err
        cleared = await ok_json("route", "set", "orders", "r", "--no-transform", env=owner_env)
        assert cleared["transform"] is None
        status, _, err = await hookbay(
            "route", "set", "orders", "r", "--transform", "missing", env=owner_env
        )
        assert (status, "no transformation named 'missing'" in err) == (1, True), err
        await ok("transformation", "delete", "shape", env=owner_env)

    async def test_dedupe_options(
        self, cli_dashboard: Dashboard, owner: Owner, owner_env: dict[str, str]
    ) -> None:
        webhook = await cli_dashboard.runtime.webhooks.create(
            create_webhook(username=owner.username, name="orders")
        )
        await ok("destination", "create", "billing", "--url", "http://127.0.0.1:9/b", env=owner_env)
        created = await ok_json(
            "route", "create", "orders", "gh", "--destination", "billing",
            "--dedupe-preset", "github", "--dedupe-window", "1h", env=owner_env,
        )  # fmt: skip
        assert created["dedupe"] == {"window_s": 3600, "preset": "github", "fields": None}
        listed = await ok("route", "list", "orders", env=owner_env)
        # DEDUPE, then DELAY ("-": none) last
        assert listed.splitlines()[1].split()[-3:] == ["github", "1h", "-"], listed
        changed = await ok_json(
            "route", "set", "orders", "gh", "--dedupe-fields", "body.id, headers.X-Request-Id",
            "--dedupe-window", "90", env=owner_env,
        )  # fmt: skip
        assert changed["dedupe"] == {
            "window_s": 90, "preset": None, "fields": ["body.id", "headers.x-request-id"]
        }  # fmt: skip
        event = create_event(
            username=owner.username, webhook_id=webhook.id, webhook_name="orders",
            body=b'{"id": "evt_9"}', created_at=utcnow(),
        )  # fmt: skip
        await cli_dashboard.runtime.events.upsert(event)
        text = await ok("route", "dry-run", "orders", "gh", env=owner_env)
        assert "no key (headers.x-request-id missing)" in text, text
        removed = await ok_json("route", "set", "orders", "gh", "--no-dedupe", env=owner_env)
        assert removed["dedupe"] is None
        for args, message, code in [
            (
                ["create", "orders", "x", "--destination", "billing", "--dedupe-preset", "github"],
                "needs --dedupe-window",
                2,
            ),
            (
                ["create", "orders", "x", "--destination", "billing", "--dedupe-window", "1h"],
                "needs --dedupe-preset or --dedupe-fields",
                2,
            ),
            (
                [
                    "create",
                    "orders",
                    "x",
                    "--destination",
                    "billing",
                    "--dedupe-preset",
                    "github",
                    "--dedupe-fields",
                    "body.id",
                    "--dedupe-window",
                    "1h",
                ],
                "exclude each other",
                2,
            ),
            (
                [
                    "create",
                    "orders",
                    "x",
                    "--destination",
                    "billing",
                    "--dedupe-preset",
                    "gitlab",
                    "--dedupe-window",
                    "1h",
                ],
                "'gitlab' is not one of",
                2,
            ),
            (
                [
                    "create",
                    "orders",
                    "x",
                    "--destination",
                    "billing",
                    "--dedupe-preset",
                    "github",
                    "--dedupe-window",
                    "soon",
                ],
                "not a duration",
                2,
            ),
            (
                [
                    "create",
                    "orders",
                    "x",
                    "--destination",
                    "billing",
                    "--dedupe-preset",
                    "github",
                    "--dedupe-window",
                    "8d",
                ],
                "dedupe.window_s",
                1,
            ),
            (
                [
                    "create",
                    "orders",
                    "x",
                    "--destination",
                    "billing",
                    "--dedupe-fields",
                    "id",
                    "--dedupe-window",
                    "1h",
                ],
                "must start with 'body.'",
                1,
            ),
            (["set", "orders", "gh", "--no-dedupe", "--dedupe-window", "1h"], "excludes", 2),
        ]:
            status, _, err = await hookbay("route", *args, env=owner_env)
            assert (status, message in err) == (code, True), (args, err)
        assert [r["name"] for r in await ok_json("route", "list", "orders", env=owner_env)] == [
            "gh"
        ]

    async def test_refusals_and_another_owners_names(
        self, cli_dashboard: Dashboard, owner: Owner, owner_env: dict[str, str]
    ) -> None:
        await cli_dashboard.runtime.webhooks.create(
            create_webhook(username=owner.username, name="orders")
        )
        await ok("destination", "create", "billing", "--url", "http://127.0.0.1:9/b", env=owner_env)
        await ok("route", "create", "orders", "r", "--destination", "billing", env=owner_env)
        for args, message, code in [
            (["create", "orders", "x", "--destination", "nowhere"], "no destination named", 1),
            (["create", "orders", "x", "--destination", "billing", "--filter", "{"], "not JSON", 2),
            (["create", "orders", "r", "--destination", "billing"], "already has a route", 1),
            (["set", "orders", "r"], "nothing to change", 2),
            (["delete", "orders", "missing"], "no route named 'missing'", 2),
        ]:
            status, _, err = await hookbay("route", *args, env=owner_env)
            assert (status, message in err) == (code, True), (args, err)
        stranger = await cli_dashboard.owner()
        other = {**owner_env, "HOOKBAY_TOKEN": stranger.token}
        foreign: list[tuple[str, ...]] = [
            ("route", "list", "orders"), ("route", "show", "orders", "r"),
            ("route", "dry-run", "orders", "r"), ("route", "delete", "orders", "r"),
            ("destination", "show", "billing"), ("destination", "pause", "billing"),
            ("destination", "delete", "billing"),
        ]  # fmt: skip
        for command in foreign:
            status, _, err = await hookbay(*command, env=other)
            assert status == 2, (command, err)
            assert err.startswith("hookbay: ")
        assert [r["name"] for r in await ok_json("route", "list", "orders", env=owner_env)] == ["r"]


class TestRetryDelivery:
    async def test_a_failed_delivery_is_shown_and_sent_again_alone(
        self, cli_dashboard: Dashboard, owner: Owner, owner_env: dict[str, str]
    ) -> None:
        rt = cli_dashboard.runtime
        webhook = create_webhook(username=owner.username, name="orders")
        await rt.webhooks.create(webhook)
        await ok("destination", "create", "billing", "--url", "http://127.0.0.1:9/b", env=owner_env)
        event = create_event(
            username=owner.username, webhook_id=webhook.id, webhook_name="orders",
            forward_url=None, routed=True, created_at=utcnow(),
        )  # fmt: skip
        await rt.events.upsert(event)
        failed = create_delivery(event, route="all", destination="billing",
                                 status=DeliveryStatus.FAILED, reason="HTTP 500")  # fmt: skip
        filtered = create_delivery(event, route="paid", destination="billing",
                                   status=DeliveryStatus.FILTERED, reason="/body/paid")  # fmt: skip
        pending = PendingSummaries()
        await record_batch(rt.events, rt.attempts, [], [], pending, [failed, filtered])
        await rt.events.summarise(pending)

        shown = await ok("events", "show", event.id, env=owner_env)
        assert f"  {failed.id} all → billing failed (HTTP 500)" in shown.splitlines()
        line = await ok("events", "retry-delivery", failed.id, env=owner_env)
        assert line.strip() == "retry of all → billing: scheduled"
        code, _, err = await hookbay("events", "retry-delivery", filtered.id, env=owner_env)
        assert (code, "filter did not match" in err) == (1, True), err
        stranger = await cli_dashboard.owner()
        other = {**owner_env, "HOOKBAY_TOKEN": stranger.token}
        code, _, err = await hookbay("events", "retry-delivery", failed.id, env=other)
        assert (code, "no delivery" in err) == (2, True), err

    async def test_a_destinations_failed_deliveries_are_sent_again(
        self, cli_dashboard: Dashboard, owner: Owner, owner_env: dict[str, str]
    ) -> None:
        rt = cli_dashboard.runtime
        await ok("destination", "create", "billing", "--url", "http://127.0.0.1:9/b", env=owner_env)
        routes = (create_route(name="all", destination="billing"),)
        webhook = create_webhook(username=owner.username, name="orders", routes=routes)
        await rt.webhooks.create(webhook)
        events = [
            create_event(username=owner.username, webhook_id=webhook.id, webhook_name="orders",
                         forward_url=None, routed=True, created_at=utcnow())
            for _ in range(2)
        ]  # fmt: skip
        for event in events:
            await rt.events.upsert(event)
        failed = [create_delivery(e, route="all", destination="billing",
                                  status=DeliveryStatus.FAILED, reason="HTTP 500") for e in events]  # fmt: skip
        pending = PendingSummaries()
        await record_batch(rt.events, rt.attempts, [], [], pending, failed)
        await rt.events.summarise(pending)

        done = await ok_json("destination", "retry-failed", "billing", env=owner_env)
        assert done == {"destination": "billing", "retried": 2}
        stranger = await cli_dashboard.owner()
        other = {**owner_env, "HOOKBAY_TOKEN": stranger.token}
        code, _, err = await hookbay("destination", "retry-failed", "billing", env=other)
        assert (code, "no destination named 'billing'" in err) == (2, True), err

    async def test_a_route_delays_its_deliveries(
        self, cli_dashboard: Dashboard, owner: Owner, owner_env: dict[str, str]
    ) -> None:
        await cli_dashboard.runtime.webhooks.create(
            create_webhook(username=owner.username, name="orders")
        )
        await ok("destination", "create", "erp", "--url", "http://127.0.0.1:9/e", env=owner_env)
        created = await ok(
            "route", "create", "orders", "r", "--destination", "erp", "--delay", "5m",
            env=owner_env,
        )  # fmt: skip
        assert created.strip() == "created route orders/r → erp (position 0, delayed 300s)"
        for given, seconds in (("2h", 7200), ("90", 90), ("30s", 30)):
            changed = await ok_json("route", "set", "orders", "r", "--delay", given, env=owner_env)
            assert changed["delay_s"] == seconds
        listed = await ok("route", "list", "orders", env=owner_env)
        assert listed.splitlines()[1].split()[-1] == "30s"
        status, _, err = await hookbay("route", "set", "orders", "r", "--delay", "25h",
                                       env=owner_env)  # fmt: skip
        assert (status, "less than or equal to 86400" in err) == (1, True), err
        status, _, err = await hookbay("route", "set", "orders", "r", "--delay", "soon",
                                       env=owner_env)  # fmt: skip
        assert (status, "give e.g. 30s, 5m, 2h" in err) == (2, True), err
        cleared = await ok_json("route", "set", "orders", "r", "--delay", "0", env=owner_env)
        assert cleared["delay_s"] is None

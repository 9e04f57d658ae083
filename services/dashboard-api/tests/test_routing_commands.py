"""``hookbay-admin destination ...`` and ``hookbay-admin route ...`` against the real database:
the API's service and rules, the CLI's own options, one line per error."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hookbay_common.cli import build
from tests.support.factories import unique_name

Invoke = Callable[..., Result]


@pytest.fixture
def hookbay(env: dict[str, str]) -> Invoke:
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(build(), list(args), input=input, env=env, catch_exceptions=False)

    return invoke


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def fails(result: Result, message: str, code: int = 1) -> None:
    assert result.exit_code == code, result.output
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.output
    if code == 1:
        assert result.stderr.count("\n") == 1
        assert result.stderr.startswith("hookbay-admin: ")


@pytest.fixture
def owner(hookbay: Invoke) -> str:
    """A user with the webhook ``orders`` and the destination ``billing``."""
    name = unique_name("u")
    ok_json(hookbay("user", "create", name, "--json"))
    ok_json(hookbay("webhook", "create", name, "orders", "--json"))
    ok_json(hookbay("destination", "create", name, "billing", "--url", "http://127.0.0.1:9/b",
                    "--json"))  # fmt: skip
    return name


class TestDestinationCommands:
    def test_create_with_every_option(self, hookbay: Invoke, owner: str) -> None:
        data = ok_json(hookbay(
            "destination", "create", owner, "slow", "--url", "http://127.0.0.1:9/slow",
            "--timeout", "30", "--header", "Authorization: Bearer cli-secret",
            "--header", "X-Team: core", "--retry-schedule", "0,10s,1m", "--rate", "5/second",
            "--max-concurrency", "1", "--json",
        ))  # fmt: skip
        assert data["headers"] == {"authorization": "********", "x-team": "********"}
        assert (data["timeout_s"], data["max_concurrency"]) == (30, 1)
        assert data["retry_schedule"] == ["0", "10s", "1m"]
        assert data["rate_limit"] == {"count": 5, "period": "second"}
        assert "cli-secret" not in json.dumps(data)

    def test_set_show_list_pause_resume_delete(self, hookbay: Invoke, owner: str) -> None:
        changed = ok_json(hookbay(
            "destination", "set", owner, "billing", "--timeout", "5", "--rate", "100/minute",
            "--json",
        ))  # fmt: skip
        assert (changed["timeout_s"], changed["rate_limit"]["period"]) == (5, "minute")
        cleared = ok_json(hookbay("destination", "set", owner, "billing", "--no-rate", "--json"))
        assert cleared["rate_limit"] is None
        assert ok_json(hookbay("destination", "show", owner, "billing", "--json")) == cleared
        listed = hookbay("destination", "list", owner)
        assert listed.exit_code == 0
        assert "billing" in listed.stdout
        assert "active" in listed.stdout
        paused = ok_json(hookbay("destination", "pause", owner, "billing", "--json"))
        assert (paused["state"], paused["state_reason"]) == ("paused", "manual")
        resumed = hookbay("destination", "resume", owner, "billing")
        assert resumed.exit_code == 0
        assert "resumed destination" in resumed.stdout
        assert "(active)" in resumed.stdout
        assert ok_json(hookbay("destination", "delete", owner, "billing", "--json"))["deleted"]
        assert ok_json(hookbay("destination", "list", owner, "--json")) == []

    @pytest.mark.parametrize(
        ("args", "message", "code"),
        [
            (["create", "{u}", "Bad", "--url", "http://127.0.0.1:9/"], "name: invalid name", 1),
            (["create", "{u}", "x", "--url", "ftp://h/"], "url: forward URL must start", 1),
            (["create", "{u}", "x", "--url", "http://h/", "--header", "no-colon"],
             "give 'Name: value'", 2),
            (["create", "{u}", "x", "--url", "http://h/", "--header", "Host: h"],
             "set by hookbay", 1),
            (["create", "{u}", "x", "--url", "http://h/", "--rate", "fast"], "COUNT/PERIOD", 2),
            (["create", "{u}", "x", "--url", "http://h/", "--rate", "5/day"],
             "rate_limit.period", 1),
            (["create", "{u}", "x", "--url", "http://h/", "--retry-schedule", "soon"],
             "not a duration", 1),
            (["create", "{u}", "x", "--url", "http://h/", "--timeout", "61"], "61", 2),
            (["create", "{u}", "billing", "--url", "http://h/"], "already has a destination", 1),
            (["set", "{u}", "billing"], "nothing to change", 2),
            (["set", "{u}", "billing", "--rate", "1/hour", "--no-rate"], "exclude each other", 2),
            (["set", "{u}", "nope", "--timeout", "3"], "no destination named 'nope'", 1),
            (["show", "nobody-here", "billing"], "no destination named 'billing'", 1),
            (["pause", "{u}", "nope"], "no destination named 'nope'", 1),
        ],
    )  # fmt: skip
    def test_refusals(
        self, hookbay: Invoke, owner: str, args: list[str], message: str, code: int
    ) -> None:
        fails(hookbay("destination", *[a.replace("{u}", owner) for a in args]), message, code)

    def test_delete_in_use_names_the_routes(self, hookbay: Invoke, owner: str) -> None:
        ok_json(hookbay("route", "create", owner, "orders", "r", "--destination", "billing",
                        "--json"))  # fmt: skip
        fails(hookbay("destination", "delete", owner, "billing"), "used by route(s) orders/r")


class TestRouteCommands:
    def test_create_list_set_show_delete(self, hookbay: Invoke, owner: str) -> None:
        spec = {"body": {"type": {"$startsWith": "invoice."}}}
        first = ok_json(hookbay(
            "route", "create", owner, "orders", "invoices", "--destination", "billing",
            "--filter", json.dumps(spec), "--json",
        ))  # fmt: skip
        assert (first["filter"], first["position"], first["enabled"]) == (spec, 0, True)
        top = ok_json(hookbay(
            "route", "create", owner, "orders", "all", "--destination", "billing",
            "--filter-file", "-", "--position", "0", "--disabled", "--json",
            input=json.dumps({"headers": {"x-kind": "a"}}),
        ))  # fmt: skip
        assert (top["position"], top["enabled"]) == (0, False)
        listed = ok_json(hookbay("route", "list", owner, "orders", "--json"))
        assert [r["name"] for r in listed] == ["all", "invoices"]
        moved = ok_json(hookbay(
            "route", "set", owner, "orders", "all", "--position", "1", "--enable", "--no-filter",
            "--json",
        ))  # fmt: skip
        assert (moved["position"], moved["enabled"], moved["filter"]) == (1, True, None)
        assert ok_json(hookbay("route", "show", owner, "orders", "all", "--json")) == moved
        table = hookbay("route", "list", owner, "orders")
        assert table.exit_code == 0
        assert "invoices" in table.stdout
        assert ok_json(hookbay("route", "delete", owner, "orders", "all", "--json"))["deleted"]
        assert [
            r["name"] for r in ok_json(hookbay("route", "list", owner, "orders", "--json"))
        ] == ["invoices"]

    def test_transform_names_one_of_the_owners_transformations(
        self, hookbay: Invoke, owner: str
    ) -> None:
        fails(hookbay(
            "route", "create", owner, "orders", "r", "--destination", "billing",
            "--transform", "missing",
        ), "no transformation named 'missing'")  # fmt: skip
        ok_json(hookbay("route", "create", owner, "orders", "r", "--destination", "billing",
                        "--json"))  # fmt: skip
        fails(hookbay("route", "set", owner, "orders", "r", "--transform", "missing"),
              "no transformation named 'missing'")  # fmt: skip
        fails(hookbay("route", "set", owner, "orders", "r", "--transform", "a", "--no-transform"),
              "exclude each other", 2)  # fmt: skip
        cleared = ok_json(hookbay("route", "set", owner, "orders", "r", "--no-transform", "--json"))
        assert cleared["transform"] is None

    def test_delay_in_seconds_or_with_a_unit(self, hookbay: Invoke, owner: str) -> None:
        made = ok_json(hookbay("route", "create", owner, "orders", "r", "--destination",
                               "billing", "--delay", "5m", "--json"))  # fmt: skip
        assert made["delay_s"] == 300
        for given, seconds in (("2h", 7200), ("45", 45), ("30s", 30), ("24h", 86400)):
            changed = ok_json(hookbay("route", "set", owner, "orders", "r", "--delay", given,
                                      "--json"))  # fmt: skip
            assert changed["delay_s"] == seconds
        assert "DELAY" in hookbay("route", "list", owner, "orders").stdout
        assert ok_json(hookbay("route", "set", owner, "orders", "r", "--delay", "0",
                               "--json"))["delay_s"] is None  # fmt: skip

    def test_dedupe_options(self, hookbay: Invoke, owner: str) -> None:
        created = ok_json(hookbay(
            "route", "create", owner, "orders", "r", "--destination", "billing",
            "--dedupe-preset", "stripe", "--dedupe-window", "1d", "--json",
        ))  # fmt: skip
        assert created["dedupe"] == {"window_s": 86400, "preset": "stripe", "fields": None}
        table = hookbay("route", "list", owner, "orders")
        assert "stripe 1d" in table.stdout, table.stdout
        changed = ok_json(hookbay(
            "route", "set", owner, "orders", "r", "--dedupe-fields", "query.id,body.n",
            "--dedupe-window", "30m", "--json",
        ))  # fmt: skip
        assert changed["dedupe"] == {
            "window_s": 1800,
            "preset": None,
            "fields": ["query.id", "body.n"],
        }
        human = hookbay("route", "dry-run", owner, "orders", "r")
        assert "DEDUPE KEY" in human.stdout, human.stdout
        fails(hookbay("route", "set", owner, "orders", "r", "--dedupe-preset", "github",
                      "--dedupe-window", "8d"), "dedupe.window_s")  # fmt: skip
        fails(hookbay("route", "set", owner, "orders", "r", "--dedupe-fields", "body..x",
                      "--dedupe-window", "1h"), "empty segment")  # fmt: skip
        fails(hookbay("route", "set", owner, "orders", "r", "--dedupe-preset", "github"),
              "needs --dedupe-window", 2)  # fmt: skip
        fails(hookbay("route", "set", owner, "orders", "r", "--no-dedupe", "--dedupe-window", "1h"),
              "excludes", 2)  # fmt: skip
        removed = ok_json(hookbay("route", "set", owner, "orders", "r", "--no-dedupe", "--json"))
        assert removed["dedupe"] is None

    def test_dry_run(self, hookbay: Invoke, owner: str) -> None:
        ok_json(hookbay("route", "create", owner, "orders", "r", "--destination", "billing",
                        "--json"))  # fmt: skip
        run = ok_json(hookbay("route", "dry-run", owner, "orders", "r", "--last", "5", "--json"))
        assert (run["route"], run["saved"], run["evaluated"], run["events"]) == ("r", True, 0, [])
        draft = ok_json(hookbay(
            "route", "dry-run", owner, "orders", "proposal", "--filter", "{}", "--json"
        ))  # fmt: skip
        assert (draft["route"], draft["saved"]) == ("proposal", False)
        human = hookbay("route", "dry-run", owner, "orders", "r")
        assert human.exit_code == 0
        assert "0 of 0 matched; nothing was delivered" in human.stdout

    @pytest.mark.parametrize(
        ("args", "message", "code"),
        [
            (["create", "{u}", "orders", "Bad", "--destination", "billing"], "invalid name", 1),
            (["create", "{u}", "orders", "r", "--destination", "nowhere"],
             "no destination named 'nowhere'", 1),
            (["create", "{u}", "orders", "r", "--destination", "billing", "--filter", "{"],
             "not JSON", 2),
            (["create", "{u}", "orders", "r", "--destination", "billing", "--filter", "[1]"],
             "filter: Input should be a valid dictionary", 1),
            (["create", "{u}", "orders", "r", "--destination", "billing", "--position", "3"],
             "position: at most 0", 1),
            (["create", "{u}", "nope", "r", "--destination", "billing"], "no webhook named", 1),
            (["set", "{u}", "orders", "r"], "nothing to change", 2),
            (["create", "{u}", "orders", "r", "--destination", "billing", "--delay", "25h"],
             "delay_s: Input should be less than or equal to 86400", 1),
            (["create", "{u}", "orders", "r", "--destination", "billing", "--delay", "soon"],
             "is not a delay", 2),
            (["create", "{u}", "orders", "r", "--destination", "billing", "--delay", "1.5s"],
             "whole number of seconds", 2),
            (["set", "{u}", "orders", "missing", "--disable"], "no route named 'missing'", 1),
            (["delete", "{u}", "orders", "missing"], "no route named 'missing'", 1),
            (["dry-run", "{u}", "orders", "missing"], "no route named 'missing'", 1),
            (["dry-run", "{u}", "orders", "r", "--last", "500"], "500", 2),
        ],
    )  # fmt: skip
    def test_refusals(
        self, hookbay: Invoke, owner: str, args: list[str], message: str, code: int
    ) -> None:
        fails(hookbay("route", *[a.replace("{u}", owner) for a in args]), message, code)

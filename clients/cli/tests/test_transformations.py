"""``hookbay transformation ...`` as an owner runs it, against the real dashboard API and a real
sandbox: every verb, code from a file and from standard input, test runs on an event and on a
request, the API's refusals as one line, another owner's names exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.dashboard import Dashboard, Owner
from tests.support.factories import create_event

from .running import ok, ok_json
from .test_main import hookbay

RESHAPE = """addHandler('transform', (request, context) => {
  console.log('tenant', context.env.TENANT);
  request.body = { id: request.body.id, tenant: context.env.TENANT };
  return request;
});"""
THROWS = "addHandler('transform', (request) => {\n  throw new Error('nope');\n});"


class TestTransformation:
    async def test_every_verb(
        self, cli_dashboard: Dashboard, owner: Owner, owner_env: dict[str, str], tmp_path: Path
    ) -> None:
        code = tmp_path / "reshape.js"
        code.write_text(RESHAPE)
        created = await ok_json(
            "transformation", "create", "reshape", "--code", str(code),
            "--env", "TENANT=acme", "--env", "API_KEY=cli-secret", env=owner_env,
        )  # fmt: skip
        assert (created["version"], created["env"]) == (
            1, {"TENANT": "********", "API_KEY": "********"},
        )  # fmt: skip
        listed = await ok("transformation", "list", env=owner_env)
        assert listed.splitlines()[1].split() == ["reshape", "1", "TENANT,API_KEY"]
        shown = await ok("transformation", "show", "reshape", env=owner_env)
        assert "console.log('tenant'" in shown
        assert "cli-secret" not in shown
        updated = await ok(
            "transformation", "update", "reshape", "--code", "-", "--env", "TENANT=********",
            env=owner_env, stdin=RESHAPE.replace("tenant:", "t:"),
        )  # fmt: skip
        assert updated.strip() == "updated transformation reshape (version 2, TENANT)"
        event = create_event(username=owner.username, body=b'{"id": "ord_9"}')
        await cli_dashboard.runtime.events.upsert(event)
        run = await ok_json("transformation", "test", "reshape", "--event", event.id, env=owner_env)
        assert run["request"]["body"] == {"id": "ord_9", "t": "acme"}
        assert run["logs"] == ["tenant acme"]
        request = json.dumps({"headers": {"x-a": "1"}, "body": {"id": 3}})
        text = await ok("transformation", "test", "reshape", "--request", "-",
                        env=owner_env, stdin=request)  # fmt: skip
        assert "log: tenant acme" in text
        assert '"t": "acme"' in text
        assert (await ok("transformation", "delete", "reshape", env=owner_env)).strip() == (
            "deleted transformation reshape"
        )
        assert await ok_json("transformation", "list", env=owner_env) == []

    async def test_a_failing_test_run_exits_1_with_its_place(
        self, owner_env: dict[str, str]
    ) -> None:
        await ok("transformation", "create", "bad", "--code", "-", env=owner_env, stdin=THROWS)
        status, out, err = await hookbay(
            "transformation", "test", "bad", "--request", "-", env=owner_env, stdin="{}"
        )
        assert status == 1, err
        assert "failed (runtime) at 2:" in out
        assert "nope" in out

    @pytest.mark.parametrize(
        ("args", "stdin", "message", "code"),
        [
            (["create", "x", "--code", "-"], "addHandler('transform', (r) => {\n  r +;\n});",
             "code: SyntaxError", 1),
            (["create", "Bad", "--code", "-"], "addHandler('transform', (r) => r)",
             "name: invalid name", 1),
            (["create", "x", "--code", "-", "--env", "novalue"], "x", "NAME=VALUE", 2),
            (["update", "x"], None, "nothing to change", 2),
            (["test", "x"], None, "either --event or --request", 2),
            (["test", "x", "--request", "-"], "not json", "not JSON", 2),
            (["show", "nope"], None, "no transformation named 'nope'", 2),
            (["test", "nope", "--event", "evt_nope"], None, "no transformation named", 2),
        ],
    )  # fmt: skip
    async def test_refusals(
        self, owner_env: dict[str, str], args: list[str], stdin: str | None, message: str,
        code: int,
    ) -> None:  # fmt: skip
        status, _, err = await hookbay("transformation", *args, env=owner_env, stdin=stdin)
        assert status == code, err
        assert message in err
        assert "Traceback" not in err

    async def test_another_owners_transformation_exits_2(
        self, cli_dashboard: Dashboard, owner_env: dict[str, str]
    ) -> None:
        other = await cli_dashboard.owner()
        await other.client.post(
            "/api/v1/transformations",
            json={"name": "theirs", "code": "addHandler('transform', (r) => r)"},
        )
        for verb in (["show", "theirs"], ["delete", "theirs"],
                     ["test", "theirs", "--request", "-"]):  # fmt: skip
            status, _, err = await hookbay("transformation", *verb, env=owner_env, stdin="{}")
            assert status == 2, err
            assert "no transformation named 'theirs'" in err

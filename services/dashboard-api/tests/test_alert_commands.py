"""``hookbay-admin alert-channel ...`` and ``hookbay-admin issue ...`` against the real store:
a channel's test notification reaches a real local sink, signed; secrets come from stdin and
never come back; bad options are one line naming the field."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result
from standardwebhooks.webhooks import Webhook

from hookbay_common.alerts import new_secret
from hookbay_common.cli import build
from tests.support.factories import unique_name
from tests.support.receiver import Receiver

Invoke = Callable[..., Result]


@pytest.fixture
def hookbay(env: dict[str, str]) -> Invoke:
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(build(), list(args), input=input, env=env, catch_exceptions=False)

    return invoke


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return json.loads(result.stdout)


@pytest.fixture
def owner(hookbay: Invoke) -> str:
    name = unique_name("u")
    ok_json(hookbay("user", "create", name, "--json"))
    return name


class TestAlertChannelCommands:
    async def test_created_from_stdin_tested_listed_deleted(
        self, hookbay: Invoke, owner: str, receiver: Receiver
    ) -> None:
        secret = new_secret()
        url = receiver.url()
        created = ok_json(await asyncio.to_thread(
            hookbay, "alert-channel", "create", owner, "--type", "webhook", "--url", url,
            "--secret-stdin", "--json", input=secret + "\n",
        ))  # fmt: skip
        assert (created["type"], created["url"]) == ("webhook", url)
        assert secret not in json.dumps(created)

        sent = ok_json(await asyncio.to_thread(
            hookbay, "alert-channel", "test", owner, created["id"], "--json"
        ))  # fmt: skip
        assert sent == {"sent": True, "error": None}
        (request,) = receiver.received(url)
        headers = {k.decode(): v.decode() for k, v in request.headers}
        payload = Webhook(secret).verify(request.body, headers)
        assert (payload["type"], payload["test"]) == ("issue.opened", True)

        listed = ok_json(await asyncio.to_thread(hookbay, "alert-channel", "list", owner, "--json"))
        assert [c["id"] for c in listed] == [created["id"]]
        human = await asyncio.to_thread(hookbay, "alert-channel", "list", owner)
        assert "webhook" in human.stdout
        ok_json(await asyncio.to_thread(
            hookbay, "alert-channel", "delete", owner, created["id"], "--json"
        ))  # fmt: skip
        assert (
            ok_json(await asyncio.to_thread(hookbay, "alert-channel", "list", owner, "--json"))
            == []
        )

    async def test_a_channel_that_refuses_exits_1(
        self, hookbay: Invoke, owner: str, receiver: Receiver
    ) -> None:
        from tests.support.receiver import Reply

        url = receiver.url(then=Reply(503, b"down"))
        created = ok_json(await asyncio.to_thread(
            hookbay, "alert-channel", "create", owner, "--type", "slack", "--url", url, "--json"
        ))  # fmt: skip
        result = await asyncio.to_thread(
            hookbay, "alert-channel", "test", owner, created["id"], "--json"
        )
        assert result.exit_code == 1
        answer = json.loads(result.stdout)
        assert answer["sent"] is False
        assert "503" in answer["error"]

    def test_missing_field_is_one_line(self, hookbay: Invoke, owner: str) -> None:
        result = hookbay("alert-channel", "create", owner, "--type", "webhook", "--json")
        assert result.exit_code == 1, result.output
        assert result.stderr == "hookbay-admin: url: a webhook channel needs url\n"
        assert "Traceback" not in result.output

    def test_another_owners_channel_is_not_found(self, hookbay: Invoke, owner: str) -> None:
        other = unique_name("u")
        ok_json(hookbay("user", "create", other, "--json"))
        created = ok_json(hookbay(
            "alert-channel", "create", owner, "--type", "slack", "--url", "http://127.0.0.1:9/s",
            "--json",
        ))  # fmt: skip
        result = hookbay("alert-channel", "delete", other, created["id"], "--json")
        assert result.exit_code == 1
        assert "no alert channel" in result.stderr
        assert len(ok_json(hookbay("alert-channel", "list", owner, "--json"))) == 1


class TestIssueCommands:
    def test_empty_and_unknown(self, hookbay: Invoke, owner: str) -> None:
        assert ok_json(hookbay("issue", "list", owner, "--json")) == []
        result = hookbay("issue", "resolve", owner, "iss_missing", "--json")
        assert result.exit_code == 1
        assert result.stderr == "hookbay-admin: no issue 'iss_missing'\n"

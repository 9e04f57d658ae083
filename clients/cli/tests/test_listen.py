"""``hookbay listen`` against the real dashboard API, database and stream: events recorded as
the recorder records them, forwarded to a real local HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from hookbay_cli.config import Credentials
from hookbay_cli.listen import Fatal, Listener, ListenOptions
from hookbay_common.models import Event, Webhook
from tests.support.dashboard import Dashboard, Owner
from tests.support.factories import create_event, create_webhook
from tests.support.net import free_port
from tests.support.receiver import Receiver, Reply, serve_receiver
from tests.support.waiting import until

HOOKBAY = os.path.join(os.path.dirname(sys.executable), "hookbay")
HEADERS = {
    "content-type": "application/octet-stream", "user-agent": "Stripe/1.0",
    "stripe-signature": "t=1,v1=abc", "x-custom": "kept", "connection": "keep-alive, x-drop",
    "x-drop": "named by connection", "x-hookbay-event-id": "forged", "keep-alive": "timeout=5",
}  # fmt: skip
"""Captured headers: the hop-by-hop ones, those Connection names and X-Hookbay-* are left out."""


@dataclass
class Hook:
    dashboard: Dashboard
    owner: Owner
    webhook: Webhook

    @property
    def credentials(self) -> Credentials:
        return Credentials(self.dashboard.url, self.owner.token)

    async def record(self, **overrides: Any) -> Event:
        """Store an event as the recorder does."""
        event = create_event(
            webhook_id=self.webhook.id, username=self.owner.username,
            webhook_name=self.webhook.name, **overrides,
        )  # fmt: skip
        await self.dashboard.runtime.events.upsert(event)
        return event


@pytest.fixture
async def hook(cli_dashboard: Dashboard) -> Hook:
    owner = await cli_dashboard.owner()
    webhook = await cli_dashboard.runtime.webhooks.create(
        create_webhook(username=owner.username, name="orders")
    )
    return Hook(cli_dashboard, owner, webhook)


@dataclass
class Running:
    listener: Listener
    out: io.StringIO
    err: io.StringIO
    task: asyncio.Task[int]

    def lines(self) -> list[str]:
        return self.out.getvalue().splitlines()

    async def stop(self) -> int:
        self.listener.stop.set()
        async with asyncio.timeout(15):
            return await self.task


@contextlib.asynccontextmanager
async def listening(hook: Hook, url: str, **options: Any) -> AsyncIterator[Running]:
    out, err = io.StringIO(), io.StringIO()
    fields: dict[str, Any] = {"stall_timeout": 2.0, "backoff_min": 0.05, **options}
    listener = Listener(hook.credentials, ListenOptions("orders", url, **fields), out=out, err=err)
    running = Running(listener, out, err, asyncio.create_task(listener.run()))
    try:
        await until(lambda: "Ready!" in err.getvalue() or running.task.done(), 15, what="ready")
        yield running
    finally:
        await running.stop()  # raises what ended it early, if anything did


class TestForwarding:
    async def test_byte_exact_body_and_original_headers_one_text_line_each(
        self, hook: Hook, receiver: Receiver
    ) -> None:
        url = receiver.url(Reply(201, b"made"))
        body = bytes(range(256)) + b"\r\n\x00tail"  # not UTF-8: sent as base64 by the API
        async with listening(hook, url) as running:
            event = await hook.record(body=body, request_headers=HEADERS)
            (got,) = await receiver.wait_for(url, 1)
            await until(lambda: len(running.lines()) == 2, 10, what="two lines")
        assert got.body == body
        names = [n.decode().lower() for n, _ in got.headers]
        assert sorted(names) == sorted([
            "host", "content-length", "content-type", "user-agent", "stripe-signature",
            "x-custom", "x-hookbay-event-id", "x-hookbay-request-id", "x-hookbay-attempt",
            "x-hookbay-listen",
        ])  # fmt: skip
        assert (got.header("user-agent"), got.header("stripe-signature")) == (
            "Stripe/1.0",
            "t=1,v1=abc",
        )
        assert (got.header("x-hookbay-event-id"), got.header("x-hookbay-request-id")) == (
            event.id, event.request_id,
        )  # fmt: skip
        sent, answer = running.lines()
        size = f"{len(body)} B"
        assert sent.split("  ")[1:] == [
            "-->",
            f"{event.request_id} {size} application/json [{event.id}]",
        ]
        assert answer.split()[2:5] == ["<--", "[201]", "POST"]
        assert answer.endswith(f"{url} ({answer.split('(')[1].split(')')[0]}) [{event.id}]")
        assert running.task.result() == 0

    async def test_answers_recorded_as_listen_attempts_the_status_kept(
        self, hook: Hook, receiver: Receiver
    ) -> None:
        url = receiver.url(Reply(500, b"boom"))
        async with listening(hook, url):
            event = await hook.record()
            await receiver.wait_for(url, 1)
        detail = (await hook.owner.client.get(f"/api/v1/events/{event.id}")).json()
        (attempt,) = detail["attempts"]
        assert (attempt["trigger"], attempt["status_code"], attempt["url"]) == ("listen", 500, url)
        assert attempt["response_body"] == "boom"
        assert detail["status"] == "pending"

    async def test_jsonl_one_object_per_event_in_order(
        self, hook: Hook, receiver: Receiver
    ) -> None:
        url = receiver.url()
        async with listening(hook, url, format="jsonl") as running:
            made = [await hook.record() for _ in range(3)]
            await until(lambda: len(running.lines()) == 3, 10, what="three lines")
        lines = [json.loads(line) for line in running.lines()]
        assert [line["event_id"] for line in lines] == [e.id for e in made]
        assert [line["request_id"] for line in lines] == [e.request_id for e in made]
        assert {line["status"] for line in lines} == {200}
        assert all(isinstance(line["latency_ms"], float) for line in lines)

    async def test_the_local_app_down_holds_the_events_then_delivers_them_in_order(
        self, hook: Hook
    ) -> None:
        receiver = Receiver()
        url = receiver.url()  # nothing listens on its port yet
        async with listening(hook, url) as running:
            made = [await hook.record() for _ in range(3)]
            await until(lambda: "holding" in running.err.getvalue(), 10, what="holding")
            assert receiver.received(url) == []
            async with serve_receiver(receiver):
                got = await receiver.wait_for(url, 3)
                await until(lambda: len(running.lines()) == 6, 10, what="six lines")
        assert [r.header("x-hookbay-event-id") for r in got] == [e.id for e in made]
        assert running.err.getvalue().count("holding") == 1  # one line, not one per try

    async def test_since_an_event_forwards_what_came_after_it(
        self, hook: Hook, receiver: Receiver
    ) -> None:
        before, first = await hook.record(), await hook.record()
        url = receiver.url()
        async with listening(hook, url, since=before.id):
            second = await hook.record()
            got = await receiver.wait_for(url, 2)
        assert [r.header("x-hookbay-event-id") for r in got] == [first.id, second.id]

    async def test_another_owners_webhook_is_refused(
        self, hook: Hook, cli_dashboard: Dashboard
    ) -> None:
        stranger = await cli_dashboard.owner()
        listener = Listener(
            Credentials(cli_dashboard.url, stranger.token), ListenOptions("orders", "3000"),
            out=io.StringIO(), err=io.StringIO(),
        )  # fmt: skip
        with pytest.raises(Fatal, match="no webhook named"):
            await listener.run()


class TestProcess:
    """``hookbay listen`` as a person runs it."""

    async def start(self, hook: Hook, *args: str, token: str | None = None) -> Any:
        env = {
            **os.environ, "HOOKBAY_SERVER": hook.dashboard.url,
            "HOOKBAY_TOKEN": token or hook.owner.token, "XDG_CONFIG_HOME": "/nonexistent",
        }  # fmt: skip
        return await asyncio.create_subprocess_exec(
            HOOKBAY, "listen", "orders", "--stall-timeout", "2", *args, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip

    async def test_ctrl_c_after_forwarding_exits_0_with_a_summary(
        self, hook: Hook, receiver: Receiver
    ) -> None:
        url = receiver.url()
        process = await self.start(hook, "--forward-to", url)
        assert process.stderr is not None
        ready = await asyncio.wait_for(process.stderr.readline(), 15)
        assert b"Ready!" in ready
        event = await hook.record()
        await receiver.wait_for(url, 1)
        process.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(process.communicate(), 15)
        assert process.returncode == 0, err
        assert f"[{event.id}]" in out.decode()
        assert "Stopped. 1 forwarded" in err.decode()
        assert f"--since {event.id}" in err.decode()

    async def test_a_revoked_token_exits_2_with_a_clear_message(self, hook: Hook) -> None:
        tokens = (await hook.owner.client.get("/api/v1/tokens")).json()
        extra = await hook.owner.client.post("/api/v1/tokens", json={"name": "laptop"})
        token = extra.json()["token"]
        new = next(
            t for t in (await hook.owner.client.get("/api/v1/tokens")).json() if t not in tokens
        )
        assert (await hook.owner.client.delete(f"/api/v1/tokens/{new['id']}")).status_code == 204
        process = await self.start(
            hook, "--forward-to", f"http://127.0.0.1:{free_port()}/", token=token
        )
        _, err = await asyncio.wait_for(process.communicate(), 15)
        assert process.returncode == 2
        assert err.decode().startswith("hookbay: ")
        assert "token is wrong, revoked or expired" in err.decode()
        assert token not in err.decode()

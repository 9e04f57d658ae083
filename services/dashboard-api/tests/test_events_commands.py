"""``hookbay-admin events list|replay|export`` and ``hookbay-admin tail`` against the real database and
Kafka: click's runner (in a thread, since each command runs its own event loop) for most, the
installed console script in a real process for the tail and the export's progress bar."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hookbay_common.cli import build
from hookbay_common.clock import isoformat, utcnow
from hookbay_common.db import EventRepository, UserRepository, WebhookRepository
from hookbay_common.db.client import Database
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.models import AttemptTrigger, DeliveryTask, Event, RejectedReason
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_common.wire import decode_task
from tests.support.factories import TEST_SECRET_KEY, create_event, create_user, create_webhook
from tests.support.kafka import TopicReader
from tests.support.terminal import HOOKBAY, run_with_terminal_stderr

Invoke = Callable[..., Awaitable[Result]]
DESTINATION = "http://127.0.0.1:9/hook"


@pytest.fixture
def hookbay(env: dict[str, str]) -> Invoke:
    runner = CliRunner()

    async def invoke(*args: str, **overrides: str | None) -> Result:
        return await asyncio.to_thread(
            runner.invoke, build(), list(args), env={**env, **overrides}, catch_exceptions=False
        )

    return invoke


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def fails(result: Result, message: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("hookbay-admin: ")
    assert result.stderr.count("\n") == 1
    assert message in result.stderr
    assert "Traceback" not in result.output


class Hook:
    """A user's webhook with a forward URL, and its events recorded through the repository."""

    def __init__(self, db: Database, username: str, name: str, webhook_id: str) -> None:
        self.username = username
        self.name = name
        self.id = webhook_id
        self._events = EventRepository(db)

    def event(self, **overrides: Any) -> Event:
        fields: dict[str, Any] = {
            "webhook_id": self.id, "username": self.username, "webhook_name": self.name,
        }  # fmt: skip
        return create_event(**{**fields, **overrides})

    async def record(self, *events: Event) -> list[Event]:
        await self._events.upsert_many(list(events))
        return list(events)


@pytest.fixture
async def hook(db: Database) -> Hook:
    user = await UserRepository(db).create(create_user())
    webhook = await WebhookRepository(db, SecretBox(TEST_SECRET_KEY)).create(
        create_webhook(username=user.username, name="orders", forward_url=DESTINATION)
    )
    return Hook(db, user.username, webhook.name, webhook.id)


@pytest.fixture
async def three(hook: Hook) -> list[Event]:
    """A delivered (no destination), a rejected and a pending event, oldest first."""
    base = utcnow() - timedelta(minutes=5)
    return await hook.record(
        hook.event(created_at=base, forward_url=None, body=b'{"n": 1}'),
        hook.event(
            created_at=base + timedelta(seconds=1), signature_valid=False,
            rejected_reason=RejectedReason.INVALID_SIGNATURE, body=b"\xff\x00raw",
            content_type="application/octet-stream",
        ),
        hook.event(created_at=base + timedelta(seconds=2), body=b'{"n": 3}'),
    )  # fmt: skip


class TestEventsList:
    async def test_json_newest_first(self, hookbay: Invoke, hook: Hook, three: list[Event]) -> None:
        page = ok_json(await hookbay("events", "list", hook.username, "orders", "--json"))
        assert page["next_cursor"] is None
        assert [e["id"] for e in page["items"]] == [e.id for e in reversed(three)]
        assert [e["status"] for e in page["items"]] == ["pending", "failed", "success"]
        newest = page["items"][0]
        assert newest["request_id"] == three[2].request_id
        assert newest["created_at"] == isoformat(three[2].created_at)
        assert newest["webhook_name"] == "orders"

    async def test_table(self, hookbay: Invoke, hook: Hook, three: list[Event]) -> None:
        result = await hookbay("events", "list", hook.username, "orders")
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert lines[0].split() == ["TIME", "ID", "REQUEST", "ID", "STATUS", "CONTENT", "TYPE"]
        assert lines[1].split() == [
            isoformat(three[2].created_at), three[2].id, three[2].request_id, "pending",
            "application/json",
        ]  # fmt: skip
        assert lines[2].split()[3:] == ["failed", "application/octet-stream"]
        assert len(lines) == 4

    async def test_status_filter(self, hookbay: Invoke, hook: Hook, three: list[Event]) -> None:
        failed = ok_json(
            await hookbay("events", "list", hook.username, "orders", "--status", "failed", "--json")
        )
        assert [e["id"] for e in failed["items"]] == [three[1].id]
        success = ok_json(
            await hookbay(
                "events", "list", hook.username, "orders", "--status", "success", "--json"
            )
        )
        assert [e["id"] for e in success["items"]] == [three[0].id]

    async def test_pages_with_the_cursor(
        self, hookbay: Invoke, hook: Hook, three: list[Event]
    ) -> None:
        first = ok_json(
            await hookbay("events", "list", hook.username, "orders", "--limit", "2", "--json")
        )
        assert [e["id"] for e in first["items"]] == [three[2].id, three[1].id]
        assert first["next_cursor"]
        human = await hookbay("events", "list", hook.username, "orders", "--limit", "2")
        assert human.stdout.splitlines()[-1] == f"more: --cursor {first['next_cursor']}"
        rest = ok_json(
            await hookbay("events", "list", hook.username, "orders", "--limit", "2",
                          "--cursor", first["next_cursor"], "--json")
        )  # fmt: skip
        assert [e["id"] for e in rest["items"]] == [three[0].id]
        assert rest["next_cursor"] is None

    async def test_empty(self, hookbay: Invoke, hook: Hook) -> None:
        page = ok_json(await hookbay("events", "list", hook.username, "orders", "--json"))
        assert page == {"items": [], "next_cursor": None}

    async def test_unknown_webhook_user_and_bad_cursor(self, hookbay: Invoke, hook: Hook) -> None:
        fails(
            await hookbay("events", "list", hook.username, "nope"),
            f"user '{hook.username}' has no webhook named 'nope'",
        )
        fails(
            await hookbay("events", "list", "nobody-here", "orders"),
            "user 'nobody-here' has no webhook named 'orders'",
        )
        result = await hookbay("events", "list", hook.username, "orders", "--cursor", "forged")
        assert result.exit_code == 1
        assert result.stderr.startswith("hookbay-admin: ")

    async def test_usage_errors_exit_2(self, hookbay: Invoke, hook: Hook) -> None:
        for args in (["--status", "delivered"], ["--limit", "0"]):
            result = await hookbay("events", "list", hook.username, "orders", *args)
            assert result.exit_code == 2, result.output


class TestEventsExport:
    async def test_to_a_file(
        self, hookbay: Invoke, hook: Hook, three: list[Event], tmp_path: Path
    ) -> None:
        output = tmp_path / "orders.json"
        result = await hookbay("events", "export", hook.username, "orders", "--output", str(output))
        assert result.exit_code == 0, result.output
        assert result.stdout == result.stderr == ""
        exported = json.loads(output.read_text())
        assert [e["id"] for e in exported] == [e.id for e in three]
        assert exported[0]["request_body"] == '{"n": 1}'
        assert exported[0]["request_body_encoding"] == "utf8"
        assert exported[1]["request_body_encoding"] == "base64"
        assert exported[1]["rejected_reason"] == "invalid_signature"
        assert exported[2]["request_headers"] == three[2].request_headers
        assert list(tmp_path.iterdir()) == [output]

    async def test_filtered_to_stdout(
        self, hookbay: Invoke, hook: Hook, three: list[Event]
    ) -> None:
        result = await hookbay("events", "export", hook.username, "orders", "--status", "failed")
        assert result.exit_code == 0, result.output
        assert [e["id"] for e in json.loads(result.stdout)] == [three[1].id]
        assert result.stderr == ""

    async def test_json_summary_with_output(
        self, hookbay: Invoke, hook: Hook, three: list[Event], tmp_path: Path
    ) -> None:
        output = tmp_path / "all.json"
        summary = ok_json(
            await hookbay("events", "export", hook.username, "orders", "-o", str(output), "--json")
        )
        assert summary == {"output": str(output), "events": 3, "bytes": output.stat().st_size}

    async def test_empty_export_is_an_empty_array(self, hookbay: Invoke, hook: Hook) -> None:
        result = await hookbay("events", "export", hook.username, "orders")
        assert json.loads(result.stdout) == []

    async def test_unknown_webhook_writes_nothing(
        self, hookbay: Invoke, hook: Hook, tmp_path: Path
    ) -> None:
        output = tmp_path / "x.json"
        fails(
            await hookbay("events", "export", hook.username, "nope", "--output", str(output)),
            f"user '{hook.username}' has no webhook named 'nope'",
        )
        assert list(tmp_path.iterdir()) == []

    async def test_progress_bar_on_a_terminal(
        self, env: dict[str, str], hook: Hook, three: list[Event], tmp_path: Path
    ) -> None:
        """stderr is a pseudo-terminal: the bar shows there, the file is the same export."""
        output = tmp_path / "orders.json"
        code, stdout, screen = await run_with_terminal_stderr(
            HOOKBAY, "events", "export", hook.username, "orders", "--output", str(output),
            env=env, columns=100,
        )  # fmt: skip
        assert code == 0, screen
        assert stdout == b""
        assert "exporting" in screen
        assert "3/3" in screen
        assert [e["id"] for e in json.loads(output.read_text())] == [e.id for e in three]


class TestEventsReplay:
    async def test_queues_a_replay_task_on_kafka(
        self, hookbay: Invoke, hook: Hook, settings: Settings
    ) -> None:
        await ensure_configured_topics(settings)
        (event,) = await hook.record(hook.event())
        reader = TopicReader(settings.kafka_bootstrap, settings.topics.replays, decode_task)
        await reader.start()
        try:
            accepted = ok_json(await hookbay("events", "replay", event.id, "--json"))
            messages = await reader.until(lambda ms: any(m.value.event.id == event.id for m in ms))
        finally:
            await reader.stop()
        assert accepted["event_id"] == event.id
        assert accepted["url"] == DESTINATION
        (message,) = [m for m in messages if m.value.event.id == event.id]
        task: DeliveryTask = message.value
        assert message.key == event.id.encode()
        assert task.trigger is AttemptTrigger.REPLAY
        assert task.chain_id == accepted["chain_id"]
        assert task.url == DESTINATION
        assert task.event == event

    async def test_human_output(self, hookbay: Invoke, hook: Hook, settings: Settings) -> None:
        await ensure_configured_topics(settings)
        (event,) = await hook.record(hook.event())
        result = await hookbay("events", "replay", event.id)
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith(f"queued replay of {event.id} to {DESTINATION} (chain ")

    async def test_unknown_and_rejected_events(self, hookbay: Invoke, hook: Hook) -> None:
        fails(await hookbay("events", "replay", "evt_nope"), "no event 'evt_nope'")
        (rejected,) = await hook.record(
            hook.event(rejected_reason=RejectedReason.INVALID_SIGNATURE, signature_valid=False)
        )
        result = await hookbay("events", "replay", rejected.id)
        assert result.exit_code == 1
        assert result.stderr.startswith("hookbay-admin: ")

    async def test_unreachable_kafka(self, hookbay: Invoke, hook: Hook) -> None:
        (event,) = await hook.record(hook.event())
        fails(
            await hookbay("events", "replay", event.id, HOOKBAY_KAFKA_BOOTSTRAP="127.0.0.1:1"),
            "Kafka error: KafkaConnectionError",
        )


class TestTail:
    async def test_unknown_webhook(self, hookbay: Invoke, hook: Hook) -> None:
        fails(
            await hookbay("tail", hook.username, "nope"),
            f"user '{hook.username}' has no webhook named 'nope'",
        )

    @pytest.mark.parametrize("as_json", [False, True])
    async def test_prints_new_events_until_ctrl_c(
        self, env: dict[str, str], hook: Hook, as_json: bool
    ) -> None:
        (before,) = await hook.record(hook.event())
        args = [hook.username, "orders", *(["--json"] if as_json else [])]
        proc = await asyncio.create_subprocess_exec(
            HOOKBAY, "tail", *args,
            env={**os.environ, **env, "HOOKBAY_TAIL_POLL_INTERVAL": "0.1"},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            assert proc.stderr is not None
            started = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert started.decode() == f"following {hook.username}/orders; Ctrl-C to stop\n"
            (event,) = await hook.record(hook.event(created_at=utcnow() - timedelta(seconds=2)))
            line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
            proc.send_signal(signal.SIGINT)
            rest, errors = await asyncio.wait_for(proc.communicate(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 0, errors.decode()
        assert errors == b""
        assert before.id.encode() not in rest
        if as_json:
            shown = json.loads(line)
            assert shown["id"] == event.id
            assert shown["request_id"] == event.request_id
            assert shown["status"] == "pending"
        else:
            assert line.split() == [
                isoformat(event.created_at), event.id, event.request_id, "pending",
                "application/json", "203.0.113.7",
            ]  # fmt: skip
        assert rest == b""

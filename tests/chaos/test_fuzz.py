"""The quick version of the fuzzing of issue 19, in ``make test``: a few hundred inputs to the real
``python -m hookbay_ingest`` and ``python -m hookbay_dashboard`` processes (real Kafka, FerretDB
and Redis), judged by ``fuzz_ingest`` and ``fuzz_api``: no 5xx, every error body JSON, no stack
trace or secret in an answer or a log line, every input answered 200 in Kafka with the body sent.
Fixed seeds: the same inputs every run (``make chaos`` runs 10,000 of each). And the leak scanner
itself, proven on planted secrets and stack traces."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from argon2 import PasswordHasher

from hookbay_common.db import Database, EventRepository, TokenRepository, UserRepository
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.plans import load_plans
from hookbay_common.settings import Settings
from hookbay_dashboard.accounts.service import AccountService
from tests.chaos.fuzz_api import fuzz_api
from tests.chaos.fuzz_ingest import fuzz_ingest, missing_from_kafka
from tests.chaos.leaks import scan, scan_logs
from tests.support.factories import TEST_SECRET_KEY, create_event, unique_name
from tests.support.processes import ServiceProcess, service_process

INGEST_INPUTS = 300
API_INPUTS = 300
PASSWORD = "fuzz-owner-password-31f8"
_FAST_HASHER = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1)


@dataclass
class FuzzStack:
    ingest: ServiceProcess
    dashboard: ServiceProcess
    settings: Settings
    targets: list[dict[str, str]]
    api_token: str
    ingest_token: str
    session_secrets: list[str]
    """The API owner's dashboard session cookie and CSRF token (a login made for the purpose)."""

    @property
    def logs(self) -> list[Path]:
        return [self.ingest.log_path, self.dashboard.log_path]

    def secrets(self) -> list[str]:
        known = [t["secret"] for t in self.targets if t["secret"]]
        tokens = [self.api_token, self.ingest_token]
        return [*known, *tokens, TEST_SECRET_KEY, PASSWORD, *self.session_secrets]


async def _owner(db: Database, *, admin: bool) -> tuple[str, str]:
    accounts = AccountService(
        UserRepository(db), TokenRepository(db), load_plans(None), hasher=_FAST_HASHER
    )
    user, issued = await accounts.create_user(
        unique_name("fz"), plan="pro", admin=admin, password=PASSWORD
    )
    return user.username, issued.token


async def _targets(api: httpx.AsyncClient, username: str) -> list[dict[str, str]]:
    """Webhooks made through the API (ingest hears of them on the change log): signed, unsigned,
    inactive."""
    targets = []
    for secret, active in [(f"fz-sig-{uuid.uuid4().hex}", True), (None, True),
                           (f"fz-off-{uuid.uuid4().hex}", False)]:  # fmt: skip
        name = unique_name("hook-")
        created = await api.post("/api/v1/webhooks", json={"name": name, "secret": secret})
        assert created.status_code == 201, created.text
        if not active:
            done = await api.post(f"/api/v1/webhooks/{name}/deactivate")
            assert done.status_code == 200, done.text
        targets.append({"path": f"/w/{username}/{name}", "secret": secret or "",
                        "active": str(active).lower()})  # fmt: skip
    return targets


async def _seed_events(db: Database, api: httpx.AsyncClient, username: str) -> None:
    """A webhook of the API owner with stored events, so that event operations find some."""
    name = unique_name("hook-")
    created = await api.post("/api/v1/webhooks", json={"name": name})
    assert created.status_code == 201, created.text
    hook = created.json()
    events = EventRepository(db)
    for n in range(3):
        await events.upsert(create_event(
            webhook_id=hook["id"], username=username, webhook_name=name,
            body=json.dumps({"n": n}).encode(), forward_url=None,
        ))  # fmt: skip


async def _session(base: str, username: str) -> list[str]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        response = await client.post(
            "/api/v1/auth/login", json={"username": username, "password": PASSWORD}
        )
        assert response.status_code == 200, response.text
        return [response.cookies["hookbay_session"], response.json()["csrf_token"]]


@pytest.fixture(scope="module")
async def fuzz_stack(
    env: dict[str, str], db: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[FuzzStack]:
    logs = tmp_path_factory.mktemp("fuzz")
    penv = {
        **env, "HOOKBAY_KAFKA_NAMESPACE": f"fuzz.{uuid.uuid4().hex[:8]}",
        "HOOKBAY_COOKIE_SECURE": "false", "HOOKBAY_LOGIN_LIMIT_PER_ADDRESS": "100000",
        "HOOKBAY_REDIS_KEY_PREFIX": f"hookbay:fuzz:{uuid.uuid4().hex[:8]}:",
    }  # fmt: skip
    fields: dict[str, Any] = {k.removeprefix("HOOKBAY_").lower(): v for k, v in penv.items()}
    settings = Settings(**fields)
    await ensure_configured_topics(settings)
    ingest_owner, ingest_token = await _owner(db, admin=False)
    api_owner, api_token = await _owner(db, admin=True)
    async with (
        service_process("ingest", penv, logs / "ingest.log") as ingest,
        service_process("dashboard", penv, logs / "dashboard.log") as dashboard,
    ):
        auth = {"Authorization": f"Bearer {ingest_token}"}
        async with httpx.AsyncClient(base_url=dashboard.base, headers=auth, timeout=30) as api:
            targets = await _targets(api, ingest_owner)
        auth = {"Authorization": f"Bearer {api_token}"}
        async with httpx.AsyncClient(base_url=dashboard.base, headers=auth, timeout=30) as api:
            await _seed_events(db, api, api_owner)
        session = await _session(dashboard.base, api_owner)
        yield FuzzStack(ingest, dashboard, settings, targets, api_token, ingest_token, session)


def _clean(report: dict[str, Any]) -> dict[str, Any]:
    """What a failed assertion shows: the report without its long lists."""
    return {k: v for k, v in report.items() if k not in {"accepted", "secrets_seen"}}


class TestFuzzIngest:
    async def test_hostile_inputs_get_documented_json_answers_and_200s_are_in_kafka(
        self, fuzz_stack: FuzzStack
    ) -> None:
        answers: list[tuple[str, str]] = []
        report = await fuzz_ingest(
            fuzz_stack.ingest.base, fuzz_stack.targets, INGEST_INPUTS, seed=0, responses=answers
        )

        assert report["inputs"] == INGEST_INPUTS
        assert report["5xx"] == 0, _clean(report)
        assert report["non_json_errors"] == 0, _clean(report)
        assert report["offending"] == 0, _clean(report)
        assert report["by_status"].get("200", 0) > INGEST_INPUTS // 5, report["by_status"]
        assert len(answers) >= INGEST_INPUTS
        assert scan(answers, fuzz_stack.secrets()) == []
        topic = fuzz_stack.settings.topics.events
        bootstrap = fuzz_stack.settings.kafka_bootstrap
        assert await missing_from_kafka(bootstrap, topic, report["accepted"]) == []
        assert scan_logs([fuzz_stack.ingest.log_path], fuzz_stack.secrets()) == []


class TestFuzzApi:
    async def test_generated_requests_get_documented_json_answers_without_leaks(
        self, fuzz_stack: FuzzStack
    ) -> None:
        answers: list[tuple[str, str]] = []
        report = await asyncio.to_thread(
            fuzz_api, fuzz_stack.dashboard.base, fuzz_stack.api_token, API_INPUTS, 0,
            responses=answers,
        )  # fmt: skip

        assert report["inputs"] >= API_INPUTS
        assert report["5xx"] == 0, _clean(report)
        assert report["non_json_errors"] == 0, _clean(report)
        assert report["offending"] == 0, _clean(report)
        assert report["by_phase"]["stateful"] > 0, report["by_phase"]
        assert {"200", "201", "204", "401", "404", "422"} <= set(report["by_status"])
        assert report["leaks"] == []
        secrets = [*fuzz_stack.secrets(), *report["secrets_seen"]]
        assert scan(answers, fuzz_stack.secrets()) == []
        assert scan_logs(fuzz_stack.logs, secrets) == []


class TestLeakScan:
    SECRET = "whsec-0123456789abcdef"
    TOKEN = "hbk_Zc4ptAcD3Y5iGNIwp1gXfqsnP_CZio1IyDrHWXYy8RU"

    def test_finds_planted_secrets_as_sent_json_escaped_and_percent_encoded(self) -> None:
        quoted = 'pass"word\\with-quotes'
        texts = [
            ("header", f"HTTP/1.1 200 OK\nset-cookie: x={self.TOKEN}\n"),
            ("body", json.dumps({"echo": f"secret is {self.SECRET}"})),
            ("log", json.dumps({"event": "login", "password": quoted})),
            ("url", "location: /cb?token=whsec-0123456789abcdef&x=%22"),
            ("encoded", "next=pass%22word%5Cwith-quotes"),
        ]

        findings = scan(texts, [self.SECRET, self.TOKEN, quoted])

        assert [f.split(":")[0] for f in findings] == ["header", "body", "log", "url", "encoded"]
        assert all("secret" in f for f in findings)
        assert not any(s in f for f in findings for s in (self.SECRET, self.TOKEN, quoted))

    def test_finds_stack_traces_plain_and_inside_json_log_lines(self) -> None:
        trace = (
            "Traceback (most recent call last):\n"
            '  File "/app/hookbay_ingest/app.py", line 12, in receive\n'
            "ValueError: boom"
        )
        texts = [
            ("plain", trace),
            ("json-log", json.dumps({"event": "request_crashed", "exception": trace})),
            ("frame-only", json.dumps({"exc": '  File "/x/y.py", line 3, in f'})),
        ]

        findings = scan(texts, [])

        assert [f.split(":")[0] for f in findings] == ["plain", "json-log", "frame-only"]
        assert all("stack trace" in f for f in findings)

    def test_clean_text_and_short_secrets_give_nothing(self) -> None:
        texts = [
            ("ok", '{"success":true,"requestId":"req_01m86rcwgbww6z2g5m5ssxkrpe"}'),
            ("error", '{"error":"Invalid signature","message":"Signature verification failed"}'),
            ("log", '{"event": "client_disconnected", "level": "info", "file": "app.py"}'),
            ("words", "a traceback is mentioned; File a report, line up"),
        ]

        assert scan(texts, [self.SECRET, self.TOKEN, "short", ""]) == []
        assert scan([("short", "the word short appears")], ["short"]) == []

    def test_scan_logs_names_file_and_line_and_a_missing_file(self, tmp_path: Path) -> None:
        log = tmp_path / "ingest.log"
        log.write_text(f'{{"event": "a"}}\n{{"event": "b", "token": "{self.TOKEN}"}}\n')

        findings = scan_logs([log, tmp_path / "absent.log"], [self.TOKEN])

        assert findings[0].startswith("ingest.log:2: secret hbk...")
        assert findings[1].endswith("absent.log: no such log file")
        assert len(findings) == 2

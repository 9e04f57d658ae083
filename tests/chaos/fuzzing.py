"""One fuzz run on real processes, the same for ``make test`` (``test_fuzz.py``: 300
inputs a surface, seed 0) and ``make chaos`` (``scripts/chaos.py --fuzz N``, a seed a day).

``fuzz_stack(env, db, logs)`` starts ``python -m hookbay_ingest``, ``python -m hookbay_dashboard``,
the forwarder and the chaos suite's destination (``tests/chaos/destination.py``) on the Kafka,
MongoDB, Redis and topic namespace of ``env`` (their logs in ``logs``), and makes what the fuzzers
need: an owner whose webhooks ingest is fuzzed against (signed, unsigned, inactive, all forwarding
to the destination; made through the API, so ingest hears of them on the change log),
on a plan of its own whose rate no run reaches (``FUZZ_PLAN``), an admin owner the API is fuzzed
as, with a webhook holding stored events and a dashboard session (its cookie and CSRF token are
secrets to look for too).

``run_fuzzing(fs, n_ingest=, n_api=, seed=)`` runs ``fuzz_ingest`` and then ``fuzz_api`` (in a
thread: it blocks), checks that every request ingest answered 200 is in Kafka with the body sent
and was delivered to the destination with that body (a 200 means delivered at least once), scans every answer and every line of both processes' logs for stack traces and secrets, and
returns one report: a summary per surface (``ingest``, ``api``) and ``ok``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import yaml
from argon2 import PasswordHasher

from hookbay_common.db import Database, EventRepository, TokenRepository, UserRepository
from hookbay_common.db import client as db_client
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.plans import PlanBook, load_plans
from hookbay_common.settings import Settings
from hookbay_dashboard.accounts.service import AccountService
from hookbay_dev.http import async_client
from tests.chaos.fuzz_api import fuzz_api
from tests.chaos.fuzz_ingest import NO_ANSWER_ALLOWED, fuzz_ingest, missing_from_kafka
from tests.chaos.leaks import scan, scan_logs
from tests.support.factories import create_event, unique_name
from tests.support.net import free_port
from tests.support.processes import ServiceProcess, service_process
from tests.support.settings import settings_of
from tests.support.waiting import until

PASSWORD = "fuzz-owner-password-31f8"
_FAST_HASHER = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1)
FUZZ_ENV = {
    "HOOKBAY_COOKIE_SECURE": "false",  # the session cookie over plain HTTP
    "HOOKBAY_LOGIN_LIMIT_PER_ADDRESS": "100000",  # the fuzzer logs in from 127.0.0.1 at will
    "HOOKBAY_ALLOW_PRIVATE_DESTINATIONS": "true",  # the destination listens on 127.0.0.1
    "HOOKBAY_RETRY_SCHEDULE": "0,1s,2s,5s,10s",
}
"""Set on top of the caller's environment (with a Redis key prefix and a plans file of the run's
own)."""
FUZZ_PLAN = "fuzz"
FUZZ_RATE_PER_MINUTE = 1_000_000
"""The ingest owner's plan: a rate no run reaches, so that every input gets past the rate limit
and is judged on what it is (on the pro plan, 1,500 a minute, 4,550 of the 12,468 answers of a
10,000-input run were 429: the checks after the rate limit never saw those inputs)."""


PROVIDERS = (("stripe", "enforce"), ("github", "record"), ("slack", "enforce"),
             ("meta", "enforce"), ("x", "enforce"))  # fmt: skip
"""The provider presets the ingest fuzzer signs for (``fuzz_ingest.kind_provider``): each its
own webhook; GitHub's in ``record`` mode, where a bad signature is still accepted and forwarded."""
DELIVERY_TIMEOUT = 180.0
"""How long after the fuzzing every accepted event may take to reach the destination (a 10,000-input
run accepts ~5,500, some of them 4.5 MB)."""


@dataclass
class FuzzStack:
    ingest: ServiceProcess
    dashboard: ServiceProcess
    forwarder: ServiceProcess
    deliveries: Path
    """The destination's log: a JSON line per request it was sent (``tests/chaos/destination.py``)."""
    settings: Settings
    targets: list[dict[str, str]]
    """The ingest owner's webhooks, as ``fuzz_ingest`` takes them."""
    api_token: str
    """The admin owner the API is fuzzed as."""
    ingest_token: str
    session_secrets: list[str]
    """The API owner's dashboard session cookie and CSRF token (a login made for the purpose)."""

    @property
    def logs(self) -> list[Path]:
        return [self.ingest.log_path, self.dashboard.log_path, self.forwarder.log_path]

    def secrets(self) -> list[str]:
        """What no answer and no log line may hold: signing secrets, tokens, the secret key,
        the owners' password, the session."""
        known = [t["secret"] for t in self.targets if t["secret"]]
        known += [t["verify_token"] for t in self.targets if t.get("verify_token")]
        tokens = [self.api_token, self.ingest_token]
        key = self.settings.secret_key.get_secret_value()
        return [*known, *tokens, key, PASSWORD, *self.session_secrets]


@contextlib.asynccontextmanager
async def fuzz_stack(env: dict[str, str], db: Database, logs: Path) -> AsyncIterator[FuzzStack]:
    """Ingest and the dashboard on ``env`` (``HOOKBAY_*``: Kafka, ``db``'s MongoDB URL, Redis,
    namespace, secret key), with the owners and webhooks the fuzzers need; the processes are
    stopped on exit (the database is the caller's)."""
    logs.mkdir(parents=True, exist_ok=True)
    plans_file = _plans_file(env.get("HOOKBAY_PLANS_FILE"), logs / "plans.yaml")
    penv = {
        **env, **FUZZ_ENV, "HOOKBAY_PLANS_FILE": str(plans_file),
        "HOOKBAY_REDIS_KEY_PREFIX": f"hookbay:fuzz:{uuid.uuid4().hex[:8]}:",
    }  # fmt: skip
    settings = settings_of(penv, Settings)
    await ensure_configured_topics(settings)
    await db_client.migrate(db)
    plans = load_plans(plans_file)
    ingest_owner, ingest_token = await _owner(db, plans, FUZZ_PLAN, admin=False)
    api_owner, api_token = await _owner(db, plans, "pro", admin=True)
    deliveries = logs / "deliveries.jsonl"
    async with (
        destination_process(deliveries, logs / "destination.log") as destination,
        service_process("ingest", penv, logs / "ingest.log") as ingest,
        service_process("dashboard", penv, logs / "dashboard.log") as dashboard,
        service_process("forwarder", penv, logs / "forwarder.log") as forwarder,
    ):
        auth = {"Authorization": f"Bearer {ingest_token}"}
        async with async_client(base_url=dashboard.base, headers=auth, timeout=30) as api:
            targets = await _targets(api, ingest_owner, destination)
        auth = {"Authorization": f"Bearer {api_token}"}
        async with async_client(base_url=dashboard.base, headers=auth, timeout=30) as api:
            await _seed_events(db, api, api_owner)
        session = await _session(dashboard.base, api_owner)
        yield FuzzStack(
            ingest, dashboard, forwarder, deliveries, settings, targets, api_token, ingest_token,
            session,
        )  # fmt: skip


@contextlib.asynccontextmanager
async def destination_process(deliveries: Path, log: Path) -> AsyncIterator[str]:
    """``tests/chaos/destination.py`` answering 200 on a free port, its requests written to
    ``deliveries``; yields its URL and is terminated on exit."""
    port = free_port()
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.chaos.destination", "--port", str(port),
            "--log", str(deliveries), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    async def answers() -> bool:
        try:
            async with async_client(timeout=2) as client:
                return (await client.get(f"{url}/_chaos/mode")).status_code == 200
        except httpx.TransportError:
            return False

    try:
        await until(answers, 30, interval=0.1, what="the destination listening")
        yield url
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


def _plans_file(source: str | None, path: Path) -> Path:
    """The caller's plans (the bundled ones without a ``HOOKBAY_PLANS_FILE``) and ``FUZZ_PLAN``,
    written to ``path``."""
    if source:
        text = Path(source).read_text()
    else:
        text = resources.files("hookbay_common").joinpath("default_plans.yaml").read_text()
    book = yaml.safe_load(text)
    book["plans"][FUZZ_PLAN] = {"rate_per_minute": FUZZ_RATE_PER_MINUTE, "retention_days": None}
    path.write_text(yaml.safe_dump(book))
    return path


async def _owner(db: Database, plans: PlanBook, plan: str, *, admin: bool) -> tuple[str, str]:
    accounts = AccountService(UserRepository(db), TokenRepository(db), plans, hasher=_FAST_HASHER)
    user, issued = await accounts.create_user(
        unique_name("fz"), plan=plan, admin=admin, password=PASSWORD
    )
    return user.username, issued.token


async def _targets(api: httpx.AsyncClient, username: str, destination: str) -> list[dict[str, str]]:
    """Webhooks made through the API (ingest hears of them on the change log): signed, unsigned,
    inactive, and one per provider preset of ``PROVIDERS``; each forwards to ``destination``."""
    targets = []
    for secret, active in [(f"fz-sig-{uuid.uuid4().hex}", True), (None, True),
                           (f"fz-off-{uuid.uuid4().hex}", False)]:  # fmt: skip
        name = unique_name("hook-")
        fields: dict[str, Any] = {
            "name": name,
            "secret": secret,
            "forward_url": f"{destination}/{name}",
        }
        created = await api.post("/api/v1/webhooks", json=fields)
        assert created.status_code == 201, created.text
        if not active:
            done = await api.post(f"/api/v1/webhooks/{name}/deactivate")
            assert done.status_code == 200, done.text
        targets.append({"path": f"/w/{username}/{name}", "secret": secret or "",
                        "active": str(active).lower()})  # fmt: skip
    for preset, mode in PROVIDERS:  # one webhook per provider preset the fuzzer signs for
        name = unique_name("hook-")
        secret = f"fz-{preset}-{uuid.uuid4().hex}"
        verification: dict[str, Any] = {"type": preset, "secret": secret, "mode": mode}
        token = f"fz-token-{uuid.uuid4().hex}" if preset == "meta" else ""
        if token:
            verification["verify_token"] = token
        fields = {"name": name, "verification": verification,
                  "forward_url": f"{destination}/{name}"}  # fmt: skip
        created = await api.post("/api/v1/webhooks", json=fields)
        assert created.status_code == 201, created.text
        targets.append({"path": f"/w/{username}/{name}", "secret": secret, "active": "true",
                        "verification": preset, "mode": mode, "verify_token": token})  # fmt: skip
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
    async with async_client(base_url=base, timeout=30) as client:
        response = await client.post(
            "/api/v1/auth/login", json={"username": username, "password": PASSWORD}
        )
        assert response.status_code == 200, response.text
        return [response.cookies["hookbay_session"], response.json()["csrf_token"]]


async def run_fuzzing(fs: FuzzStack, *, n_ingest: int, n_api: int, seed: int = 0) -> dict[str, Any]:
    """Fuzz both surfaces of ``fs`` (module docstring). Per surface: ``inputs``, ``requests``,
    ``answers``, ``by_status``, ``5xx``, ``non_json_errors``, ``unexpected_status``,
    ``no_answer`` (``allowed`` by reason, ``offending``), ``accepted`` and ``missing_from_kafka``
    (ingest), ``leaks``, ``offending``, ``examples``, ``duration_s``, ``exited`` (the process
    ended during the run), ``ok``; ``ok`` overall when both are."""
    started = time.monotonic()
    ingest_answers: list[tuple[str, str]] = []
    ingest = await fuzz_ingest(fs.ingest.base, fs.targets, n_ingest, seed, responses=ingest_answers)
    kafka_started = time.monotonic()
    missing = await missing_from_kafka(
        fs.settings.kafka_bootstrap, fs.settings.topics.events, ingest["accepted"]
    )
    kafka_s = time.monotonic() - kafka_started
    delivery_started = time.monotonic()
    undelivered = await not_delivered(fs.deliveries, ingest["accepted"], DELIVERY_TIMEOUT)
    delivery_s = time.monotonic() - delivery_started
    api_answers: list[tuple[str, str]] = []
    api = await asyncio.to_thread(
        fuzz_api, fs.dashboard.base, fs.api_token, n_api, seed, responses=api_answers
    )
    # secrets the API run stored or was issued may show up in either log (a webhook's secret
    # travels to ingest on the change log)
    every_secret = [*fs.secrets(), *api.pop("secrets_seen")]
    ingest_leaks = scan(ingest_answers, fs.secrets())
    ingest_leaks += scan_logs([fs.ingest.log_path], every_secret)
    api_leaks = api["leaks"] + scan(api_answers, fs.secrets())
    api_leaks += scan_logs([fs.dashboard.log_path], every_secret)
    surfaces = {
        "ingest": {
            **_ingest_summary(ingest, len(ingest_answers), missing, ingest_leaks, kafka_s),
            "not_delivered": undelivered,
            "delivery_check_s": round(delivery_s, 1),
        },
        "api": _api_summary(api, len(api_answers), api_leaks),
    }
    # the forwarder's log is scanned with ingest's: it carries what ingest accepted. For the
    # stack's own secrets only: the API run's secrets never reach the forwarder, and a word the
    # API fuzzer chose as a secret ("namespace", say) is found in any log as a key
    surfaces["ingest"]["leaks"] += scan_logs([fs.forwarder.log_path], fs.secrets())
    for key, process in (("ingest", fs.ingest), ("api", fs.dashboard)):
        surfaces[key]["exited"] = process.proc.returncode if process.exited else None
        surfaces[key]["ok"] = bool(
            surfaces[key]["offending"] == 0
            and not surfaces[key]["leaks"]
            and not surfaces[key].get("missing_from_kafka")
            and not surfaces[key].get("not_delivered")
            and not process.exited
        )
    return {
        "seed": seed,
        **surfaces,
        "no_answer_allowed_because": NO_ANSWER_ALLOWED,
        "duration_s": round(time.monotonic() - started, 1),
        "ok": all(s["ok"] for s in surfaces.values()),
    }


async def not_delivered(
    deliveries: Path, accepted: list[dict[str, Any]], timeout: float
) -> list[str]:
    """Each accepted input that the destination has not been sent with a 200 answered within
    ``timeout`` seconds, or was sent with another body than the input framed: one line per
    problem (empty when every one arrived)."""
    expected = {item["request_id"]: item for item in accepted}
    delivered: dict[str, str] = {}
    read = 0

    def arrived() -> bool:
        nonlocal read
        with deliveries.open() as log:
            log.seek(read)
            for line in log:
                if not line.endswith("\n"):
                    break  # a line still being written: read it whole next time
                read += len(line.encode())
                request = json.loads(line)
                if request["status"] == 200:
                    delivered.setdefault(request["request_id"], request["sha256"])
        return expected.keys() <= delivered.keys()

    with contextlib.suppress(AssertionError):
        await until(arrived, timeout, interval=0.5, what="every accepted event delivered")
    problems = []
    for request_id, item in expected.items():
        where = f"{request_id} (input {item['index']}, {item['kind']})"
        if request_id not in delivered:
            problems.append(f"{where}: answered 200, not delivered within {timeout:g} s")
        elif item["sha256"] is not None and delivered[request_id] != item["sha256"]:
            problems.append(f"{where}: delivered with another body than the one sent")
    return problems


def _ingest_summary(
    report: dict[str, Any], answers: int, missing: list[str], leaks: list[str], kafka_s: float
) -> dict[str, Any]:
    return {
        "n": report["n"], "inputs": report["inputs"], "requests": report["requests"],
        "answers": answers, "by_status": report["by_status"], "by_kind": report["by_kind"],
        "5xx": report["5xx"], "non_json_errors": report["non_json_errors"],
        "unexpected_status": report["unexpected_status"],
        "bad_success_bodies": report["bad_success_bodies"],
        "no_answer": {k: report["no_answer"][k] for k in ("allowed", "offending")},
        "accepted": len(report["accepted"]), "handshakes": report["handshakes"],
        "missing_from_kafka": missing,
        "accepted_variants": dict(Counter(a["note"] for a in report["accepted"] if a["note"])),
        "kafka_check_s": round(kafka_s, 1), "leaks": leaks,
        "offending": report["offending"], "examples": report["examples"],
        "duration_s": report["duration_s"],
    }  # fmt: skip


def _api_summary(report: dict[str, Any], answers: int, leaks: list[str]) -> dict[str, Any]:
    return {
        "n": report["n"], "inputs": report["inputs"], "requests": report["requests"],
        "answers": answers, "by_status": report["by_status"], "by_phase": report["by_phase"],
        "by_operation": report["by_operation"],
        "5xx": report["5xx"], "non_json_errors": report["non_json_errors"],
        "unexpected_status": report["unexpected_status"],
        "check_failures": report["check_failures"],
        "no_answer": {
            "allowed": report["protocol_no_answer_allowed"],
            "offending": report["protocol_no_answer_offending"] + report["transport_errors"],
        },
        "rewritten_for_safety": report["rewritten_for_safety"],
        "generation_errors": report["generation_errors"],
        "cleaned_up": report["cleaned_up"], "leaks": leaks,
        "offending": report["offending"], "examples": report["examples"],
        "duration_s": report["duration_s"],
    }  # fmt: skip

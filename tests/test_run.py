"""`make run`'s supervisor end to end: demo data, the printed next steps, a clean stop on SIGINT
(the first run) and on SIGTERM (the second)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import pytest
from pymongo import MongoClient

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parent.parent


def start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "run.py")],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def read_until(proc: subprocess.Popen[str], marker: str, timeout: float = 120) -> str:
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    seen = ""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {marker!r} within {timeout} s:\n{seen}"
        if selector.select(
            remaining
        ):  # raw reads: a buffered readline would hide lines from select
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"run.py ended early:\n{seen}"
            seen += chunk.decode()
    return seen


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGINT) -> str:
    proc.send_signal(sig)
    try:
        rest, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, _ = proc.communicate()
        raise AssertionError(f"run.py did not stop within 60 s:\n{rest}") from None
    return rest


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def recorded_status(mongo_url: str, request_id: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    with MongoClient[dict[str, Any]](mongo_url) as client:
        events = client.get_default_database().events
        while (doc := events.find_one({"request_id": request_id})) is None:
            assert time.monotonic() < deadline, f"event {request_id} not recorded"
            time.sleep(0.1)
    return str(doc["status"])


def failed_delivery(client: httpx.Client, timeout: float = 30) -> dict[str, Any]:
    """The demo's failed delivery (webhook ``shipping``), once the forwarder tried it."""
    deadline = time.monotonic() + timeout
    while True:
        page = client.get("/api/v1/webhooks/shipping/events", params={"status": "failed"})
        assert page.status_code == 200, page.text
        if page.json()["items"]:
            event_id = page.json()["items"][0]["id"]
            detail: dict[str, Any] = client.get(f"/api/v1/events/{event_id}").json()
            return detail
        assert time.monotonic() < deadline, "the demo's failed delivery was not recorded"
        time.sleep(0.2)


def delivery_stats(
    client: httpx.Client, webhook: str, timeout: float = 60, **minimum: int
) -> dict[str, int]:
    """The last week's totals of ``webhook``'s stats, once each of ``minimum`` is reached (or
    the timeout passed)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = client.get(f"/api/v1/webhooks/{webhook}/stats", params={"window": "7d"})
        assert answer.status_code == 200, answer.text
        totals: dict[str, int] = answer.json()["totals"]
        if all(totals[k] >= v for k, v in minimum.items()) or time.monotonic() > deadline:
            return totals
        time.sleep(0.2)


class TestRun:
    @pytest.fixture
    def env(self, env: dict[str, str]) -> dict[str, str]:
        port = free_port()
        return {
            **env,
            "HOOKBAY_INGEST_PORT": str(port),
            "HOOKBAY_PUBLIC_URL": f"http://127.0.0.1:{port}",
            "HOOKBAY_FORWARDER_METRICS_PORT": str(free_port()),
            "HOOKBAY_RECORDER_METRICS_PORT": str(free_port()),
            "HOOKBAY_STATS_METRICS_PORT": str(free_port()),
            "HOOKBAY_DASHBOARD_PORT": str(free_port()),
        }

    def test_seeds_demo_prints_next_steps_and_stops_on_sigint_and_sigterm(
        self, env: dict[str, str]
    ) -> None:
        first = start(env)
        try:
            output = read_until(first, "stop:       Ctrl-C")
        finally:
            output += stop(first)
        assert first.returncode == 0, output
        assert "login       demo / demo-password" in output
        dashboard = f"http://127.0.0.1:{env['HOOKBAY_DASHBOARD_PORT']}"
        assert f"dashboard   {dashboard}/" in output
        token = re.search(r"API token   (hbk_\S+)", output)
        assert token is not None, output
        body = '{"order_id": 1234, "status": "paid"}'
        signature = hmac.new(b"demo-signing-secret", body.encode(), hashlib.sha256).hexdigest()
        url = f"{env['HOOKBAY_PUBLIC_URL']}/w/demo/orders"
        assert f"curl -sS -X POST '{url}'" in output
        assert f"X-Service-Signature: sha256={signature}" in output
        assert output.rstrip().endswith("run: stopped")
        with MongoClient[dict[str, Any]](env["HOOKBAY_MONGO_URL"]) as client:
            db = client.get_default_database()
            user = db.users.find_one({"_id": "demo"})
            assert user is not None
            assert user["plan"] == "starter"
            assert db.webhooks.count_documents({"username": "demo", "name": "orders"}) == 1

        second = start(env)  # idempotent: the demo data exists already
        try:
            output = read_until(second, "stop:       Ctrl-C")
            # the printed curl works: signed with the demo secret, accepted by the running ingest
            headers = {
                "Content-Type": "application/json",
                "X-Service-Signature": f"sha256={signature}",
            }
            status, answer = post(url, body.encode(), headers)
            assert status == 200, answer
            assert answer["success"] is True
            # the recorder stores it; the demo webhook has no destination, so it is a success
            answer_id = str(answer["requestId"])
            assert recorded_status(env["HOOKBAY_MONGO_URL"], answer_id) == "success"
            status, answer = post(url, body.encode(), {"X-Service-Signature": "sha256=00"})
            assert (status, answer["error"]) == (401, "Invalid signature")
            # the demo login works on the dashboard, which lists the event just sent
            with httpx.Client(base_url=dashboard, timeout=10) as client:
                login = client.post(
                    "/api/v1/auth/login", json={"username": "demo", "password": "demo-password"}
                )
                assert login.status_code == 200, login.text
                assert "HttpOnly" in login.headers["set-cookie"]
                listed = client.get(
                    "/api/v1/webhooks/orders/events", params={"request_id": answer_id}
                )
                assert listed.status_code == 200, listed.text
                assert [e["request_id"] for e in listed.json()["items"]] == [answer_id]
                # the first run left demo events of different kinds, and a failed delivery
                demo = client.get("/api/v1/webhooks/orders/events", params={"limit": 100})
                kinds = {(e["content_type"], e["status"]) for e in demo.json()["items"]}
                assert {
                    ("application/json", "success"), ("application/x-www-form-urlencoded",
                    "success"), ("application/xml", "success"), ("image/png", "success"),
                    ("application/json", "failed"),
                } <= kinds  # fmt: skip
                # the stats processor counts what arrived: the demo's four accepted events and
                # the curl's, the demo's badly signed one and the one just refused
                totals = delivery_stats(client, "orders", received=5, rejected=2)
                assert (totals["received"], totals["rejected"]) >= (5, 2), totals
                failed = failed_delivery(client)
                # a 404 is final, not retried; the first run's stop may have cut an attempt off
                # before it (its destination is that run's ingest): a network error, retried
                *cut, last = [a["status_code"] for a in failed["attempts"]]
                assert (last, set(cut) | {None}) == (404, {None})
        finally:
            output += stop(second, signal.SIGTERM)  # SIGTERM stops it as cleanly as Ctrl-C
        assert second.returncode == 0, output
        assert "issued on the first run" in output
        assert output.rstrip().endswith("run: stopped")


class TestPrintedCommands:
    def test_the_printed_cli_command_works_in_a_new_shell(self) -> None:
        """`make run` with no application setting (only where its infrastructure runs, which
        `make test` moves), then the printed `hookbay-admin` command in a new shell with nothing set
        but that: the CLI finds the same local settings (ports, the checkout's key)."""
        infra = {k: v for k, v in os.environ.items() if k.startswith("HOOKBAY_INFRA_")}
        shell = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), **infra}
        services = {
            "HOOKBAY_INGEST_PORT": str(free_port()),
            "HOOKBAY_FORWARDER_METRICS_PORT": str(free_port()),
            "HOOKBAY_RECORDER_METRICS_PORT": str(free_port()),
            "HOOKBAY_STATS_METRICS_PORT": str(free_port()),
            "HOOKBAY_DASHBOARD_PORT": str(free_port()),
        }
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "run.py")],
            env={**shell, **services}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True, cwd=ROOT,
        )  # fmt: skip
        try:
            output = read_until(proc, "stop:       Ctrl-C")
        finally:
            output += stop(proc)
        command = re.search(r"manage:\s+(\S+hookbay-admin webhook list demo)", output)
        assert command is not None, output
        done = subprocess.run(
            command.group(1).split(), env=shell, cwd=ROOT, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "orders" in done.stdout
        assert done.stderr == ""

    def test_a_missing_setting_is_named_outside_a_checkout(self, tmp_path: Path) -> None:
        """Run from elsewhere than the checkout's .venv (an installed image): one clear line."""
        from hookbay_common import localenv

        assert localenv.checkout_root() == ROOT
        script = (
            "import sys; import hookbay_common.localenv as l;"
            " l.checkout_root = lambda: None; from hookbay_common.cli import main;"
            " main(['webhook', 'list', 'demo'])"
        )
        done = subprocess.run(
            [sys.executable, "-c", script], env={"PATH": os.environ["PATH"]},
            capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 1
        assert done.stderr.startswith(
            "hookbay-admin: invalid settings: HOOKBAY_SECRET_KEY is not set"
        )
        assert "Traceback" not in done.stderr

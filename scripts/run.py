"""`make run`: the local infrastructure, every hookbay service, demo data, and what to do next.

Runs in the foreground; SIGINT (Ctrl-C) or SIGTERM stops the services and then the infrastructure
this run started (infrastructure that was already running is left running). Python rather than
bash because a shell started in the background cannot trap SIGINT, which it inherits as ignored.
Every HOOKBAY_* variable of the caller passes through to every service.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import FrameType

from seed_demo import local_ingest, send_demo_events

from hookbay_common.localenv import local_defaults
from hookbay_dev.processes import ServiceProcess, launch

ROOT = Path(__file__).resolve().parent.parent
INFRA = ROOT / "deploy" / "local" / "infra.sh"
BIN = Path(sys.executable).parent

# (name, argv, port variable, default port): grows as services land; each stops cleanly on SIGTERM
SERVICES: list[tuple[str, list[str], str, int]] = [
    ("ingest", [sys.executable, "-m", "hookbay_ingest"], "HOOKBAY_INGEST_PORT", 8080),
    (
        "forwarder",
        [sys.executable, "-m", "hookbay_forwarder", "forwarder"],
        "HOOKBAY_FORWARDER_METRICS_PORT",
        9101,
    ),
    (
        "recorder",
        [sys.executable, "-m", "hookbay_forwarder", "recorder"],
        "HOOKBAY_RECORDER_METRICS_PORT",
        9102,
    ),
    (
        "stats",
        [sys.executable, "-m", "hookbay_forwarder", "stats"],
        "HOOKBAY_STATS_METRICS_PORT",
        9103,
    ),
    ("dashboard-api", [sys.executable, "-m", "hookbay_dashboard"], "HOOKBAY_DASHBOARD_PORT", 8081),
]


def environment() -> dict[str, str]:
    """The caller's environment plus the checkout's local settings for whatever it leaves unset
    (the same values the ``hookbay-admin`` command falls back on: ``hookbay_common.localenv``)."""
    env = dict(os.environ)
    env.update(local_defaults(ROOT, env, create_key=True))
    if sys.stderr.isatty():  # the services log to this stderr: readable lines for a person
        env.setdefault("HOOKBAY_LOG_FORMAT", "console")
    return env


def infra_running() -> bool:
    status = subprocess.run([str(INFRA), "status"], capture_output=True, text=True, check=True)
    return all(
        ": running" in line
        for line in status.stdout.splitlines()
        if not line.startswith("postgres")
    )


def banner(env: dict[str, str], demo: dict[str, object]) -> str:
    public = env.get("HOOKBAY_PUBLIC_URL", "http://127.0.0.1:8080").rstrip("/")
    body = '{"order_id": 1234, "status": "paid"}'
    signature = hmac.new(str(demo["secret"]).encode(), body.encode(), hashlib.sha256).hexdigest()
    token = (
        demo["token"]
        or "(issued on the first run; `hookbay-admin token create demo` for a new one)"
    )
    started = ", ".join(name for name, *_ in SERVICES) or "none yet"
    dashboard = f"http://127.0.0.1:{env.get('HOOKBAY_DASHBOARD_PORT', '8081')}"
    return f"""
hookbay is running (services: {started}; Kafka {env["HOOKBAY_KAFKA_BOOTSTRAP"]}, MongoDB-wire {env["HOOKBAY_MONGO_URL"]}, Redis {env["HOOKBAY_REDIS_URL"]})

  dashboard   {dashboard}/   (API: {dashboard}/api/v1/docs)
  login       {demo["user"]} / {demo["password"]}   (webhook {demo["webhook"]}: a few demo events of different kinds)
  API token   {token}

  send an event:
    curl -sS -X POST '{public}/w/{demo["user"]}/{demo["webhook"]}' \\
      -H 'Content-Type: application/json' \\
      -H 'X-Service-Signature: sha256={signature}' \\
      -d '{body}'

  health:     http://127.0.0.1:{env.get("HOOKBAY_INGEST_PORT", "8080")}/readyz  (metrics: /metrics)
  events:     curl -sS -H 'Authorization: Bearer {demo["token"] or "<token>"}' {dashboard}/api/v1/webhooks/{demo["webhook"]}/events
  manage:     .venv/bin/hookbay-admin webhook list demo    (.venv/bin/hookbay-admin tail demo {demo["webhook"]})
  listen:     .venv/bin/hookbay login --server {dashboard} --token <the API token>
              .venv/bin/hookbay listen {demo["webhook"]} --forward-to localhost:3000
  stop:       Ctrl-C
"""


class Supervisor:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: list[ServiceProcess] = []
        self.stopping = threading.Event()

    def start(self) -> None:
        """Each service with this terminal's output (``make run`` shows their logs)."""
        for name, argv, _, _ in SERVICES:
            # die_with_parent: a supervisor killed outright (SIGKILL) leaves no service behind
            self.children.append(launch(argv, self.env, None, role=name, die_with_parent=True))

    def wait_ready(self, timeout: float = 60) -> bool:
        """Until every service answers 200 on /readyz; False when one exits or time runs out."""
        deadline = time.monotonic() + timeout
        for (name, _, port_variable, default), child in zip(SERVICES, self.children, strict=True):
            url = f"http://127.0.0.1:{self.env.get(port_variable, default)}/readyz"
            while not _answers(url):
                if child.exited or self.stopping.is_set() or time.monotonic() > deadline:
                    print(f"run: {name} did not become ready ({url})", file=sys.stderr)
                    return False
                time.sleep(0.2)
        return True

    def wait(self) -> int:
        """Until a signal arrives (0) or a service exits by itself (1)."""
        while not self.stopping.wait(0.5):
            for child in self.children:
                if child.exited:
                    print(
                        f"run: {child.role} exited with status {child.proc.returncode}; stopping",
                        file=sys.stderr,
                    )
                    return 1
        return 0

    def stop(self) -> None:
        for child in self.children:  # all told at once, so they shut down side by side
            if not child.exited:
                child.terminate()
        for child in self.children:
            if child.stop(grace=20):
                print(f"run: {child.role} did not stop within 20 s; killed it", file=sys.stderr)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback http
            return bool(response.status == 200)
    except OSError:
        return False


def main() -> int:
    env = environment()
    supervisor = Supervisor(env)

    def on_signal(signum: int, _: FrameType | None) -> None:
        supervisor.stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    owned_infra = not infra_running()
    subprocess.run([str(INFRA), "up"], check=True, env=env)
    status = 1
    try:
        subprocess.run([str(BIN / "hookbay-admin"), "migrate"], check=True, env=env)
        seeded = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "seed_demo.py")],
            check=True, env=env, capture_output=True, text=True,
        )  # fmt: skip
        supervisor.start()
        if supervisor.wait_ready():
            demo = json.loads(seeded.stdout)
            if demo["token"]:  # the first run: a few events of different kinds to look at
                send_demo_events(local_ingest())
            print(banner(env, demo), flush=True)
            status = supervisor.wait()
    except subprocess.CalledProcessError as exc:
        print(
            f"run: {' '.join(map(str, exc.cmd))} failed with status {exc.returncode}",
            file=sys.stderr,
        )
        if getattr(exc, "stderr", None):
            print(exc.stderr, file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        supervisor.stop()
        if owned_infra:
            subprocess.run([str(INFRA), "down"], check=False, env=env)
        print("run: stopped", file=sys.stderr, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())

"""The ``listen`` scenario: ``hookbay listen`` as a real process, between it and the dashboard
API a loopback proxy the scenario breaks, while ingest accepts a webhook's events at a steady
rate through the whole stack. Faults, one after the other: the proxy black-holes every byte
(``black_hole``: the listener must notice the silence itself), the dashboard API process is
restarted, the listener is stopped (SIGSTOP, a suspended laptop) and continued. Then the load
stops and everything is drained.

Checked: the request ids the local app received (the first time each) equal the ids ingest
accepted, each body byte-identical (SHA-256 against what the load client sent), in the order
of the webhook's events on Kafka (the order the forwarder delivers them in; with two ingest
replicas it can differ from ``created_at`` by a few milliseconds), and the listener ends with exit status 0
on SIGINT. Repeats are counted, not failures (one forward per event per listener session:
this run is one session)."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookbay_common.clock import utcnow
from hookbay_common.db import TokenRepository
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import ApiToken
from hookbay_common.secrets_box import hash_api_token, new_api_token
from tests.chaos.stack import Infra, Stack
from tests.support.proxy import serve_proxy
from tests.support.receiver import Receiver, serve_receiver
from tests.support.waiting import until

DRAIN = 300.0


@dataclass(frozen=True)
class ListenTiming:
    """Seconds: load before the first fault (``warm``) and between faults (``between``), the
    black hole, the SIGSTOP, load after the last fault (``after``); the listener's stall
    timeout and the server's heartbeat interval."""

    warm: float
    black_hole: float
    between: float
    stopped: float
    after: float
    stall_timeout: float
    heartbeat: float


FULL = ListenTiming(warm=10, black_hole=90, between=10, stopped=120, after=15,
                    stall_timeout=45, heartbeat=15)  # fmt: skip
"""The defaults a developer runs with (45 s stall timeout, 15 s heartbeats)."""
SHORT = ListenTiming(warm=2, black_hole=4, between=2, stopped=2, after=2,
                     stall_timeout=2, heartbeat=0.5)  # fmt: skip
HOOKBAY = str(Path(sys.executable).parent / "hookbay")


async def run(
    infra: Infra, workdir: Path, rate: float, timing: ListenTiming = FULL
) -> dict[str, Any]:
    stack = Stack(infra, "listen", workdir / "listen", timing.black_hole)
    stack.env["HOOKBAY_TAIL_HEARTBEAT"] = str(timing.heartbeat)
    async with stack, serve_receiver(Receiver()) as app:
        target = stack.targets[0]
        (stack.workdir / "targets.json").write_text(  # the load goes to one webhook only
            json.dumps([{"path": target.path, "secret": target.secret}])
        )
        username, webhook = target.path.split("/")[2:4]
        token = new_api_token()
        await TokenRepository(stack.db).create(ApiToken(
            id=new_id(IdPrefix.TOKEN), username=username, name="laptop",
            token_hash=hash_api_token(token), created_at=utcnow(),
        ))  # fmt: skip
        local = app.url()
        dashboard_port = int(stack.processes["dashboard"].base.rsplit(":", 1)[1])
        async with serve_proxy(dashboard_port) as proxy:
            out, err = stack.workdir / "listen.jsonl", stack.workdir / "listen.log"
            with out.open("wb") as stdout, err.open("wb") as stderr:
                listener = await asyncio.create_subprocess_exec(
                    HOOKBAY, "listen", webhook, "--forward-to", local, "--format", "jsonl",
                    "--stall-timeout", str(timing.stall_timeout), "--backoff-min", "0.2",
                    env={**os.environ, "HOOKBAY_SERVER": proxy.url, "HOOKBAY_TOKEN": token,
                         "XDG_CONFIG_HOME": str(stack.workdir / uuid.uuid4().hex)},
                    stdout=stdout, stderr=stderr,
                )  # fmt: skip
            await until(lambda: b"Ready!" in err.read_bytes(), 60, what="hookbay listen ready")
            await stack.start_load(rate)
            faults: dict[str, float] = {}
            await asyncio.sleep(timing.warm)  # the load runs: nothing to wait for
            began = time.monotonic()
            proxy.black_hole()
            await asyncio.sleep(timing.black_hole)
            proxy.restore()
            faults["black_hole_s"] = time.monotonic() - began
            await asyncio.sleep(timing.between)
            began = time.monotonic()
            dashboard = stack.processes["dashboard"]
            dashboard.terminate()
            await dashboard.wait(60)
            await stack.start("dashboard")
            faults["dashboard_restart_s"] = time.monotonic() - began
            await asyncio.sleep(timing.between)
            began = time.monotonic()
            listener.send_signal(signal.SIGSTOP)
            await asyncio.sleep(timing.stopped)
            listener.send_signal(signal.SIGCONT)
            faults["sigstop_s"] = time.monotonic() - began
            await asyncio.sleep(timing.after)
            await stack.stop_load()
            accepted = {str(a["request_id"]): a["sha256"] for a in stack.accepted()}
            started = time.monotonic()
            await until(lambda: accepted.keys() <= _received_ids(app, local), DRAIN,
                        interval=0.5, what="every accepted event received by the local app")  # fmt: skip
            caught_up = time.monotonic() - started
            listener.send_signal(signal.SIGINT)
            exit_status = await asyncio.wait_for(listener.wait(), 60)
        order = list(await stack.in_kafka())  # one owner: one partition, in offset order
        verdict = _check(app, local, accepted, order)
        return {
            "scenario": "listen", "rate": rate, "timing": timing.__dict__,
            "faults": {k: round(v, 1) for k, v in faults.items()},
            "caught_up_s": round(caught_up, 1), "listener_exit": exit_status,
            "reconnects": err.read_text().count("reconnecting"),
            "proxy_connections": proxy.connections, "exited": stack.exited(),
            "verdict": verdict,
        }  # fmt: skip


def _received_ids(app: Receiver, url: str) -> set[str]:
    return {r.header("x-hookbay-request-id") or "" for r in app.received(url)}


def _check(app: Receiver, url: str, accepted: dict[str, str], order: list[str]) -> dict[str, Any]:
    first: dict[str, str] = {}  # request id → body SHA-256 of its first arrival, in arrival order
    repeats = 0
    for received in app.received(url):
        request_id = received.header("x-hookbay-request-id") or ""
        if request_id in first:
            repeats += 1
            continue
        first[request_id] = hashlib.sha256(received.body).hexdigest()
    missing = sorted(accepted.keys() - first.keys())
    unexpected = sorted(first.keys() - accepted.keys() - set(order))
    altered = sorted(r for r, sha in first.items() if r in accepted and accepted[r] != sha)
    rank = {request_id: i for i, request_id in enumerate(order)}
    arrived = [rank[r] for r in first if r in rank]
    out_of_order = sum(1 for a, b in itertools.pairwise(arrived) if b < a)
    return {
        "ok": not (missing or unexpected or altered or out_of_order),
        "accepted": len(accepted), "received": len(first), "repeats": repeats,
        "missing": len(missing), "unexpected": len(unexpected), "altered": len(altered),
        "out_of_order": out_of_order,
        "examples": (missing + unexpected + altered)[:5],
    }  # fmt: skip

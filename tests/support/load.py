"""A load client in a process of its own: signed requests to many webhooks at a steady rate.

``python -m tests.support.load TARGETS OUT --base URL --rate N``: ``TARGETS`` is a JSON list of
``{"path": "/w/<user>/<hook>", "secret": "..."}``; every request goes to the next target in
turn, with a unique JSON body signed (``X-Service-Signature: sha256=<hex>``) with the target's
secret. Open loop: a request starts every ``1/N`` s whatever the answers (at most ``--in-flight``
at once). One JSON line per answer is appended to ``OUT`` and flushed at once, so a test reads
progress while the load runs: ``n``, ``target``, ``status`` (0: no HTTP answer), ``request_id``,
``retry_after``, ``body``, ``sent`` and ``answered`` (``time.time()``). SIGTERM: stop starting
requests, wait for those in flight, exit 0.

``--mix`` (the chaos suite): bodies of every kind and size instead — JSON, form-encoded and
binary, 1 KB to 500 KB (``mixed_body``) — and lines carry ``sha256``, ``size`` and
``content_type`` instead of ``body``. ``--base`` given several times (ingest replicas): request
``n`` goes to the next base in turn among those whose ``/readyz`` answered 200 at the last probe
(every ``PROBE`` s; all of them while none does) and, when that base refuses the connection
(nothing was sent), to the next: what a load balancer following readiness does (a Kubernetes
Service drops a terminating or unready pod; ingest drains for ``HOOKBAY_DRAIN_DELAY`` first).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import random
import signal
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from hookbay_dev.http import async_client

PROBE = 0.5
KB = 1024
SIZES = ((0.90, 1 * KB, 4 * KB), (0.09, 4 * KB, 64 * KB), (0.01, 64 * KB, 500 * KB))
"""``--mix`` body sizes: (share, smallest, largest); mean ~8 KB, so 150 requests/s stay within
what the embedded store records on two cores while every size class still occurs each second."""


def mixed_body(n: int) -> tuple[bytes, str]:
    """Request ``n``'s body and content type: JSON, form-encoded or binary (in turn), its size
    drawn from ``SIZES``; reproducible from ``n``, unique by its ``n`` and random bytes."""
    rng = random.Random(n)
    draw, size = rng.random(), 1 * KB
    for share, smallest, largest in SIZES:
        if draw < share:
            size = rng.randint(smallest, largest)
            break
        draw -= share
    kind = n % 3
    if kind == 0:
        pad = os.urandom(size // 2).hex()[: max(0, size - 40)]
        return json.dumps({"n": n, "pad": pad}).encode(), "application/json"
    if kind == 1:
        pad = urllib.parse.quote(os.urandom(size // 3).hex() + "&=é ü")
        return f"n={n}&pad={pad}".encode()[: max(size, 16)], "application/x-www-form-urlencoded"
    return n.to_bytes(8, "big") + os.urandom(max(0, size - 8)), "application/octet-stream"


async def one(
    client: httpx.AsyncClient, bases: list[str], n: int, target: int, spec: dict[str, str],
    out: IO[str], *, mix: bool = False, unready: frozenset[str] = frozenset(),
) -> None:  # fmt: skip
    if mix:
        body, content_type = mixed_body(n)
    else:
        body = json.dumps({"n": n, "target": target, "pad": os.urandom(8).hex()}).encode()
        content_type = "application/json"
    signature = hmac.new(spec["secret"].encode(), body, hashlib.sha256).hexdigest()
    headers = {"content-type": content_type, "x-service-signature": f"sha256={signature}"}
    sent = time.time()
    line: dict[str, Any] = {"n": n, "target": target, "sent": sent}
    if mix:
        line.update(
            sha256=hashlib.sha256(body).hexdigest(), size=len(body), content_type=content_type
        )
    else:
        line["body"] = body.decode()
    response: httpx.Response | None = None
    serving = [b for b in bases if b not in unready] or bases
    for turn in range(len(serving)):
        base = serving[(n + turn) % len(serving)]
        line["base"] = base
        try:
            response = await client.post(base + spec["path"], content=body, headers=headers)
        except httpx.ConnectError as exc:  # refused: nothing was sent, another upstream may take it
            line.update(status=0, error=type(exc).__name__)
            continue
        except httpx.HTTPError as exc:
            line.update(status=0, error=type(exc).__name__)
        break
    if response is not None:
        request_id = None
        if response.status_code == 200:
            request_id = response.json()["requestId"]
        line.pop("error", None)
        line.update(
            status=response.status_code, request_id=request_id,
            retry_after=response.headers.get("retry-after"),
        )  # fmt: skip
        if response.status_code != 200:
            line["answer"] = response.text[:300]
    line["answered"] = time.time()
    out.write(json.dumps(line) + "\n")
    out.flush()


async def run(bases: list[str], targets: list[dict[str, str]], out_path: Path, rate: float,
              in_flight: int, *, mix: bool = False) -> None:  # fmt: skip
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    # a connection per request: a busy server may end an idle keep-alive connection just as a
    # request is written on it (the client then sees no answer at all, through no fault of ours)
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=0)
    slots = asyncio.Semaphore(in_flight)
    tasks: set[asyncio.Task[None]] = set()
    with out_path.open("a") as out:
        async with async_client(timeout=60, limits=limits) as client:
            unready: set[str] = set()
            if len(bases) > 1:
                probing = asyncio.create_task(_probe(client, bases, unready, stopping))
                tasks.add(probing)
                probing.add_done_callback(tasks.discard)
            started = time.monotonic()
            n = 0
            while not stopping.is_set():
                await slots.acquire()

                async def request(n: int = n) -> None:
                    try:
                        target = n % len(targets)
                        await one(
                            client, bases, n, target, targets[target], out, mix=mix,
                            unready=frozenset(unready),
                        )  # fmt: skip
                    finally:
                        slots.release()

                task = asyncio.create_task(request())
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                n += 1
                delay = started + n / rate - time.monotonic()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stopping.wait(), delay)
            if tasks:
                await asyncio.wait(tasks, timeout=90)


async def _probe(
    client: httpx.AsyncClient, bases: list[str], unready: set[str], stopping: asyncio.Event
) -> None:
    """Keep ``unready`` to the bases whose ``/readyz`` did not answer 200 at the last probe."""
    while not stopping.is_set():
        for base in bases:
            try:
                ready = (await client.get(base + "/readyz", timeout=PROBE)).status_code == 200
            except httpx.HTTPError:
                ready = False
            (unready.discard if ready else unready.add)(base)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), PROBE)


@dataclass
class Lines:
    """A JSON-lines file another process appends to, read incrementally (whole lines only)."""

    path: Path
    read: list[dict[str, Any]] = field(default_factory=list)
    _offset: int = 0

    def __call__(self) -> list[dict[str, Any]]:
        if self.path.exists():
            with self.path.open("rb") as file:
                file.seek(self._offset)
                chunk = file.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self._offset += len(complete)
            self.read.extend(json.loads(line) for line in complete.splitlines())
        return self.read


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("targets", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--base", required=True, action="append")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--in-flight", type=int, default=200)
    parser.add_argument("--mix", action="store_true")
    args = parser.parse_args()
    targets = json.loads(args.targets.read_text())
    asyncio.run(run(args.base, targets, args.out, args.rate, args.in_flight, mix=args.mix))
    sys.exit(0)


if __name__ == "__main__":
    main()

"""A load client in a process of its own: signed requests to many webhooks at a steady rate.

``python -m tests.support.load TARGETS OUT --base URL --rate N``: ``TARGETS`` is a JSON list of
``{"path": "/w/<user>/<hook>", "secret": "..."}``; every request goes to the next target in
turn, with a unique JSON body signed (``X-Service-Signature: sha256=<hex>``) with the target's
secret. Open loop: a request starts every ``1/N`` s whatever the answers (at most ``--in-flight``
at once). One JSON line per answer is appended to ``OUT`` and flushed at once, so a test reads
progress while the load runs: ``n``, ``target``, ``status`` (0: no HTTP answer), ``request_id``,
``retry_after``, ``body``, ``sent`` and ``answered`` (``time.time()``). SIGTERM: stop starting
requests, wait for those in flight, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

import httpx


async def one(
    client: httpx.AsyncClient, n: int, target: int, spec: dict[str, str], out: IO[str]
) -> None:
    body = json.dumps({"n": n, "target": target, "pad": os.urandom(8).hex()}).encode()
    signature = hmac.new(spec["secret"].encode(), body, hashlib.sha256).hexdigest()
    headers = {"content-type": "application/json", "x-service-signature": f"sha256={signature}"}
    sent = time.time()
    line: dict[str, Any] = {"n": n, "target": target, "body": body.decode(), "sent": sent}
    try:
        response = await client.post(spec["path"], content=body, headers=headers)
    except httpx.HTTPError as exc:
        line.update(status=0, error=type(exc).__name__)
    else:
        request_id = None
        if response.status_code == 200:
            request_id = response.json()["requestId"]
        line.update(
            status=response.status_code, request_id=request_id,
            retry_after=response.headers.get("retry-after"),
        )  # fmt: skip
    line["answered"] = time.time()
    out.write(json.dumps(line) + "\n")
    out.flush()


async def run(base: str, targets: list[dict[str, str]], out_path: Path, rate: float,
              in_flight: int) -> None:  # fmt: skip
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    # a connection per request: a busy server may end an idle keep-alive connection just as a
    # request is written on it (the client then sees no answer at all, through no fault of ours)
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=0)
    slots = asyncio.Semaphore(in_flight)
    tasks: set[asyncio.Task[None]] = set()
    with out_path.open("a") as out:
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            started = time.monotonic()
            n = 0
            while not stopping.is_set():
                await slots.acquire()

                async def request(n: int = n) -> None:
                    try:
                        target = n % len(targets)
                        await one(client, n, target, targets[target], out)
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("targets", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--base", required=True)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--in-flight", type=int, default=200)
    args = parser.parse_args()
    targets = json.loads(args.targets.read_text())
    asyncio.run(run(args.base, targets, args.out, args.rate, args.in_flight))
    sys.exit(0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A fast local webhook destination for ``scripts/bench_forwarder.py``; run in its own process.

    python scripts/bench_receiver.py --port 8999 [--slow-seconds 2]

A bare ASGI app on uvicorn (uvloop, httptools, one worker, access log off):

* ``POST /o/{owner}``: drain the body, answer 200 ``{}``;
* ``POST /slow/{owner}``: the same after sleeping ``--slow-seconds`` (a slow destination);
* ``GET /_stats``: JSON summary (deliveries, first/last arrival, per-owner counts, duplicates);
  ``?samples=1`` adds the end-to-end samples, ``?events=1`` the arrival time of every event id;
* ``POST /_reset``: forget everything recorded so far;
* ``POST /_slow?seconds=S``: make ``/slow/...`` answer after ``S`` seconds from now on (``0``
  lets a slow destination's backlog drain);
* ``GET /_health``: 200.

Each delivery is recorded when its request reaches the app (before any sleep), with
``time.time()``: the arrival per ``X-Hookbay-Event-Id`` (the first one; later arrivals of the
same id count as duplicates), the count per owner, and, when the request carries the header
``X-Bench-Sent`` (the load client's wall-clock send time, forwarded unchanged by ingest and
forwarder), an end-to-end sample ``[owner, sent, arrival, event id]``.

Keep-alive is 75 s (nginx's default), so an idle pooled connection of the forwarder is not
closed under it during a run (uvicorn's default of 5 s races with httpx's 5 s pool expiry).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

HOST = "127.0.0.1"
_MAX_BODY_CHUNKS = 100_000  # bound on the drain loop; a 1 KB body arrives in one chunk
_OK_START: Message = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"), (b"content-length", b"2")],
}
_OK_BODY: Message = {"type": "http.response.body", "body": b"{}"}


class Stats:
    """Everything recorded since the last reset."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.first: float | None = None
        self.last: float | None = None
        self.arrivals: dict[str, float] = {}
        self.duplicates = 0
        self.retries = 0  # deliveries with X-Hookbay-Attempt > 1
        self.owners: dict[str, int] = {}
        self.samples: list[tuple[str, float, float, str]] = []
        self.other = 0  # requests without an event id (not from the forwarder)

    def record(self, owner: str, headers: list[tuple[bytes, bytes]], arrival: float) -> None:
        event_id = sent = attempt = None
        for name, value in headers:
            if name == b"x-hookbay-event-id":
                event_id = value.decode("latin-1")
            elif name == b"x-bench-sent":
                sent = value
            elif name == b"x-hookbay-attempt":
                attempt = value
        if event_id is None:
            self.other += 1
            return
        self.count += 1
        if self.first is None:
            self.first = arrival
        self.last = arrival
        self.owners[owner] = self.owners.get(owner, 0) + 1
        if attempt is not None and attempt != b"1":
            self.retries += 1
        if event_id in self.arrivals:
            self.duplicates += 1
            return
        self.arrivals[event_id] = arrival
        if sent is not None:
            try:
                self.samples.append((owner, float(sent), arrival, event_id))
            except ValueError:
                self.other += 1

    def summary(self, *, samples: bool, events: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "count": self.count,
            "unique": len(self.arrivals),
            "first": self.first,
            "last": self.last,
            "duplicates": self.duplicates,
            "retries": self.retries,
            "other": self.other,
            "owners": self.owners,
        }
        if samples:
            out["samples"] = self.samples
        if events:
            out["events"] = self.arrivals
        return out


STATS = Stats()
SLOW_SECONDS = 2.0


def _set_slow(query: bytes) -> None:
    global SLOW_SECONDS
    params = dict(part.split("=", 1) for part in query.decode().split("&") if "=" in part)
    SLOW_SECONDS = float(params["seconds"])


async def _drain(receive: Receive) -> None:
    for _ in range(_MAX_BODY_CHUNKS):
        message = await receive()
        if not message.get("more_body", False):
            return


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    """The destination. Run with ``--lifespan off``."""
    if scope["type"] != "http":
        return
    arrival = time.time()
    path: str = scope["path"]
    method: str = scope["method"]
    parts = path.split("/")
    if method == "POST" and len(parts) == 3 and parts[1] in ("o", "slow") and parts[2]:
        STATS.record(parts[2], scope["headers"], arrival)
        await _drain(receive)
        if parts[1] == "slow":
            await asyncio.sleep(SLOW_SECONDS)
        await send(_OK_START)
        await send(_OK_BODY)
        return
    await _drain(receive)
    if method == "GET" and path == "/_stats":
        query: bytes = scope.get("query_string", b"")
        summary = STATS.summary(samples=b"samples=1" in query, events=b"events=1" in query)
        await _answer(send, 200, json.dumps(summary).encode())
    elif method == "POST" and path == "/_slow":
        _set_slow(scope.get("query_string", b""))
        await _answer(send, 200, b"{}")
    elif method == "POST" and path == "/_reset":
        STATS.reset()
        await _answer(send, 200, b"{}")
    elif method == "GET" and path == "/_health":
        await _answer(send, 200, b'{"status":"ok"}')
    else:
        await _answer(send, 404, b'{"error":"not found"}')


def main() -> None:
    global SLOW_SECONDS
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--slow-seconds", type=float, default=SLOW_SECONDS)
    args = parser.parse_args()
    SLOW_SECONDS = args.slow_seconds

    import uvicorn

    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_keep_alive=75,
    )


if __name__ == "__main__":
    main()

"""The chaos suite's destination: a process of its own that every webhook forwards to.

``python -m tests.chaos.destination --port P --log FILE``. Every request is answered by the
current mode and written down as one JSON line (flushed at once): ``request_id`` and ``event_id``
(the forwarder's ``X-Hookbay-*`` headers), ``attempt``, ``path``, ``sha256`` and ``size`` of the
body, ``status`` answered (0: held until the forwarder gave up), ``at`` (``time.time()``) and
``concurrent``: the requests to the same path in flight when it arrived, itself included (1: it
overlapped no other). Bodies are not kept: a run moves gigabytes.

A request to ``/_alerts/<owner>`` is an owner's issue notification (a signed-webhook alert
channel): always answered 200, and written down with ``notification`` (its ``type``) and the
issue's ``issue_type`` and ``destination`` instead of event headers.

Modes, set by ``POST /_chaos/mode`` with ``{"mode": ...}``: ``ok`` (200), ``unavailable`` (503),
``hang`` (no answer until the forwarder's timeout ends the request), ``slow`` (200 after
``SLOW`` seconds) and ``flaky`` (``FLAKY``); with ``"paths": [...]`` the mode applies to those
paths only (``"mode": null`` gives them back to the general mode). SIGTERM ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import uvicorn
from starlette.types import Receive, Scope, Send

MODES = {"ok": 200, "unavailable": 503, "hang": 0, "flaky": 200, "slow": 200}
SLOW = 0.5
"""Seconds a ``slow`` destination takes to answer."""
FLAKY = 10
"""In ``flaky`` mode one request in ``FLAKY`` (chosen by its request id) gets a 503 on its first
attempt, so retries go on all the time (the soak)."""
HANG = 600.0
"""How long a ``hang`` holds a request: far beyond any forward timeout, so the forwarder's ends it."""


class Destination:
    def __init__(self, log: IO[str]) -> None:
        self.mode = "ok"
        self.by_path: dict[str, str] = {}
        self._log = log
        self._in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]
                await send({"type": f"{kind}.complete"})  # lifespan.startup / .shutdown
                if kind == "lifespan.shutdown":
                    return
        assert scope["type"] == "http"
        self._in_flight[scope["path"]] += 1
        try:
            await self._request(scope, receive, send, self._in_flight[scope["path"]])
        finally:
            self._in_flight[scope["path"]] -= 1

    async def _request(self, scope: Scope, receive: Receive, send: Send, concurrent: int) -> None:
        control = scope["path"] == "/_chaos/mode"
        alert = scope["path"].startswith("/_alerts/")
        digest, size, kept = hashlib.sha256(), 0, bytearray()
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            digest.update(chunk)
            size += len(chunk)
            if control or alert:
                kept += chunk
            if not message.get("more_body"):
                break
        if control:
            if scope["method"] == "POST":
                asked = json.loads(kept)
                mode = asked["mode"]
                assert mode in MODES or (mode is None and "paths" in asked), mode
                for path in asked.get("paths", []):
                    if mode is None:
                        self.by_path.pop(path, None)
                    else:
                        self.by_path[path] = mode
                if "paths" not in asked:
                    self.mode = mode
            answer = {"mode": self.mode, "paths": self.by_path}
            return await _answer(send, 200, json.dumps(answer).encode())
        if alert:
            told = json.loads(kept)
            issue = told.get("issue", {})
            self._write({
                "request_id": "", "path": scope["path"], "status": 200, "at": time.time(),
                "notification": told.get("type"), "issue_type": issue.get("type"),
                "destination": issue.get("destination"),
            })  # fmt: skip
            return await _answer(send, 200, b"ok")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        mode = self.by_path.get(scope["path"], self.mode)
        status = MODES[mode]
        request_id = headers.get("x-hookbay-request-id", "")
        first = headers.get("x-hookbay-attempt") == "1"
        if mode == "flaky" and first and _picked(request_id):
            status = 503
        line: dict[str, Any] = {
            "request_id": request_id,
            "event_id": headers.get("x-hookbay-event-id"),
            "attempt": headers.get("x-hookbay-attempt"), "path": scope["path"],
            "sha256": digest.hexdigest(), "size": size, "status": status, "at": time.time(),
            "concurrent": concurrent,
        }  # fmt: skip
        if status == 0:  # written first: the forwarder's timeout cancels what follows
            self._write(line)
            await asyncio.sleep(HANG)
            return
        if mode == "slow":
            await asyncio.sleep(SLOW)
        await _answer(send, status, b"ok" if status == 200 else b"unavailable")
        self._write(line)

    def _write(self, line: dict[str, Any]) -> None:
        self._log.write(json.dumps(line) + "\n")
        self._log.flush()


def _picked(request_id: str) -> bool:
    return int(hashlib.sha256(request_id.encode()).hexdigest(), 16) % FLAKY == 0


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    with args.log.open("a") as log:
        uvicorn.run(
            Destination(log), host="127.0.0.1", port=args.port, log_level="warning",
            access_log=False, timeout_graceful_shutdown=1,
        )  # fmt: skip


if __name__ == "__main__":
    main()

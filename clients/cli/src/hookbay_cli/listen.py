"""``hookbay listen``: a webhook's events, forwarded to a URL on the developer's machine.

Two tasks joined by a bounded queue. The reader holds the live stream
(``GET /webhooks/{name}/events/stream``) and queues every message in order; the forwarder
takes them one at a time: an event is fetched whole (``GET /events/{id}``: body bytes and
headers), sent to the local URL, its answer printed and recorded (``POST
/events/{id}/attempts``, in the background), and only then is the message's id (a cursor of the
stream) taken as the point to resume from. So on any reconnect the stream starts after the last
event handled, never after one merely read; what the server sends again is skipped by event id
(one forward per event per session).

Failures and what they do:
- the stream: a network error, a 5xx, or no byte for ``stall_timeout`` (the server sends a
  heartbeat every 15 s) ⇒ reconnect, with jittered exponential backoff, forever; 401/403/404
  end the command (``Fatal``, exit 2).
- the local app refuses the connection (or its name does not resolve) ⇒ the event is held and
  sent again, backing off to ``HOLD_MAX`` seconds, until the app answers; nothing behind it
  goes first. Any answer (a 500 too) or an error after the request went out (a timeout) is
  the event's outcome: printed, recorded, and the next event goes.
- Ctrl-C (SIGINT) or SIGTERM: reading stops, the request in flight finishes, the recordings
  are sent, a summary is printed, exit 0. A second Ctrl-C exits 130 at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import re
import secrets
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TextIO
from urllib.parse import quote

import httpx

from hookbay_cli import api
from hookbay_cli.api import ApiError
from hookbay_cli.config import Credentials
from hookbay_cli.sse import Message, SseParser

HOP_BY_HOP: Final = frozenset(
    {
        "connection", "keep-alive", "proxy-connection", "proxy-authenticate",
        "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade",
        "host", "content-length", "expect",
    }
)  # fmt: skip
"""What the forwarder leaves out too: connection headers, and what the request sets itself."""
HOLD_MAX: Final = 10.0
"""Seconds between two tries of a held event, at most."""
RECORD_BODY_LIMIT: Final = 64 * 1024
QUEUE_SIZE: Final = 1000
RECORD_TRIES: Final = 3


class _Stopped(Exception):
    """Stopped (Ctrl-C) while waiting for the server: the event is left unhandled."""


class Fatal(Exception):
    """A reason to end with exit status 2 (401/403/404, or a --since that names nothing)."""


@dataclass(frozen=True)
class ListenOptions:
    webhook: str
    forward_to: str
    format: str = "text"
    since: str | None = None
    skip_verify: bool = False
    timeout: float = 30.0
    """Seconds the local app has to answer."""
    stall_timeout: float = 45.0
    """Seconds without a byte from the server before the stream is taken for dead."""
    backoff_min: float = 1.0
    backoff_max: float = 30.0
    record: bool = True


@dataclass
class Tally:
    forwarded: int = 0
    ok: int = 0
    failed: int = 0
    errors: int = 0


@dataclass
class _Start:
    last_id: str | None
    keep: Callable[[dict[str, Any]], bool]
    label: str


def forward_url(text: str) -> str:
    """``3000`` → ``http://localhost:3000/``; ``localhost:3000/hook`` → ``http://…``; a full
    URL unchanged (its query string kept)."""
    if text.isdigit():
        return f"http://localhost:{text}/"
    if "://" not in text:
        text = f"http://{text}"
    if "/" not in text.split("://", 1)[1]:
        text += "/"
    return text


def parse_since(text: str, now: datetime) -> datetime:
    """``30s``/``10m``/``2h``/``7d`` ago, or an ISO 8601 time (UTC when it names no zone)."""
    match = re.fullmatch(r"(\d+)([smhd])", text)
    if match:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[match[2]]
        return now - timedelta(**{unit: int(match[1])})
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise Fatal(
            f"--since {text!r}: not an event id (evt_...), a time or 30s/10m/2h/7d"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def local_headers(captured: dict[str, str], extra: dict[str, str]) -> list[tuple[str, str]]:
    """The captured headers to send on (as the forwarder does: without hop-by-hop headers,
    those ``Connection`` names, and any ``X-Hookbay-*``), then hookbay's own."""
    named = {t.strip().lower() for t in captured.get("connection", "").split(",")}
    kept = [
        (name, value)
        for name, value in captured.items()
        if name not in HOP_BY_HOP and name not in named and not name.startswith("x-hookbay-")
    ]
    return kept + list(extra.items())


class Listener:
    def __init__(
        self,
        credentials: Credentials,
        options: ListenOptions,
        *,
        out: TextIO = sys.stdout,
        err: TextIO = sys.stderr,
    ) -> None:
        self.credentials = credentials
        self.options = options
        self.url = forward_url(options.forward_to)
        self.out = out
        self.err = err
        self.session = f"lst_{secrets.token_hex(8)}"
        self.stop = asyncio.Event()
        self.handled: set[str] = set()
        self.cursor: str | None = None
        self.last_event: str | None = None
        self.tally = Tally()
        self._queue: asyncio.Queue[Message] = asyncio.Queue(QUEUE_SIZE)
        self._recordings: set[asyncio.Task[None]] = set()
        self._record_failed = False
        self._state = ""
        self._ready = ""

    # ------------------------------------------------------------------ running

    async def run(self) -> int:
        """Listen until stopped (exit status 0) or refused (``Fatal`` → 2)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._interrupt)
        try:
            async with (
                api.client(self.credentials) as server,
                httpx.AsyncClient(verify=not self.options.skip_verify, timeout=self.options.timeout)
                as local,
            ):  # fmt: skip
                try:
                    start = await self._start(server)
                except ApiError as exc:
                    raise Fatal(self._refused(exc)) from None
                self.cursor = start.last_id
                self._ready = (
                    f"Ready! Forwarding {self.options.webhook} to {self.url} ({start.label}); "
                    "Ctrl-C to quit"
                )
                reader = asyncio.create_task(self._read(server), name="listen-reader")
                forwarder = asyncio.create_task(
                    self._forward_all(server, local, start), name="listen-forwarder"
                )
                stopping = asyncio.create_task(self.stop.wait())
                done, _ = await asyncio.wait(
                    {reader, forwarder, stopping}, return_when=asyncio.FIRST_COMPLETED
                )
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
                self.stop.set()
                await forwarder  # finishes the event in flight
                stopping.cancel()
                await self._drain_recordings()
                if reader in done and reader.exception() is not None:
                    raise reader.exception()  # type: ignore[misc]
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
        self._summary()
        return 0

    def _interrupt(self) -> None:
        if self.stop.is_set():
            os._exit(130)  # a second Ctrl-C: now
        self._notice("stopping: finishing the request in flight (Ctrl-C again to quit now)")
        self.stop.set()

    async def _start(self, server: httpx.AsyncClient) -> _Start:
        """Check the webhook and work out where the stream starts and what it forwards."""
        name = quote(self.options.webhook, safe="")
        await api.request(server, "GET", f"/webhooks/{name}")
        since = self.options.since
        if since is None:
            return _Start(None, lambda _: True, "new events")
        if since.startswith("evt_"):
            try:
                event = await api.request(server, "GET", f"/events/{quote(since, safe='')}")
            except ApiError as exc:
                if exc.status == 404:
                    raise Fatal(f"--since {since}: no such event") from None
                raise
            if event["webhook_name"] != self.options.webhook:
                raise Fatal(f"--since {since}: an event of webhook {event['webhook_name']}")
            after = (_time(event["created_at"]), event["id"])
            return _Start(
                since, lambda e: (_time(e["created_at"]), e["id"]) > after, f"after {since}"
            )
        at = parse_since(since, datetime.now(UTC))
        page = await api.request(
            server, "GET", f"/webhooks/{name}/events", params={"until": at.isoformat(), "limit": 1}
        )
        before = page["items"][0]["id"] if page["items"] else None
        ms = int(at.timestamp() * 1000)
        return _Start(
            before or f"0.{ms}", lambda e: _time(e["created_at"]) >= at, f"since {at.isoformat()}"
        )

    # ------------------------------------------------------------------ the stream

    async def _read(self, server: httpx.AsyncClient) -> None:
        """Hold the stream open, reconnecting forever; queue its messages in order."""
        failures = 0
        while not self.stop.is_set():
            try:
                got = await self._read_once(server)
            except ApiError as exc:
                if exc.fatal:
                    raise Fatal(self._refused(exc)) from None
                reason = exc.message
                got = False
            except (httpx.HTTPError, OSError, TimeoutError) as exc:
                reason = _describe(exc)
                got = False
            else:
                reason = "the server ended the stream"
            failures = 0 if got else failures + 1
            delay = min(self.options.backoff_max, self.options.backoff_min * 2 ** min(failures, 16))
            delay *= random.uniform(0.8, 1.2)  # noqa: S311 - jitter, not a secret
            self._state_change("down", f"{reason}; reconnecting (next try in {delay:.1f} s)")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self.stop.wait()

    async def _read_once(self, server: httpx.AsyncClient) -> bool:
        """One connection: whether it delivered a message. Ends on a stall (``TimeoutError``)."""
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        if self.cursor:
            headers["Last-Event-ID"] = self.cursor
        path = f"/webhooks/{quote(self.options.webhook, safe='')}/events/stream"
        timeout = httpx.Timeout(10.0, read=None)
        parser = SseParser()
        got = False
        async with server.stream("GET", path, headers=headers, timeout=timeout) as response:
            if response.status_code >= 400:
                await response.aread()
                raise api.error_of(response)
            chunks = response.aiter_raw()
            while True:
                try:
                    async with asyncio.timeout(self.options.stall_timeout):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    return got
                except TimeoutError:
                    raise TimeoutError(
                        f"no data from the server for {self.options.stall_timeout:g} s"
                    ) from None
                for message in parser.feed(chunk):
                    if not got:
                        got = True
                        self._state_change("up", self._ready or "reconnected")
                        self._ready = ""
                    await self._queue.put(message)

    # ------------------------------------------------------------------ forwarding

    async def _forward_all(
        self, server: httpx.AsyncClient, local: httpx.AsyncClient, start: _Start
    ) -> None:
        while not self.stop.is_set():
            getting = asyncio.create_task(self._queue.get())
            stopping = asyncio.create_task(self.stop.wait())
            await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not getting.done():
                getting.cancel()
                return
            message = getting.result()
            try:
                done = await self._handle(server, local, start, message)
            except _Stopped:
                return
            if done:
                self.cursor = message.last_id or self.cursor

    async def _handle(
        self, server: httpx.AsyncClient, local: httpx.AsyncClient, start: _Start, message: Message
    ) -> bool:
        """Act on one stream message; whether it is done with (False: stopped while holding)."""
        if message.event == "gap":
            data = json.loads(message.data)
            self._notice(
                f"the resume point ({data.get('since')}) is older than the owner's retention: "
                "events after it may have been deleted; going on with what is kept"
            )
            return True
        if message.event != "event":
            return True  # status changes, heartbeats: only their cursor matters here
        summary = json.loads(message.data)
        event_id = summary["id"]
        if event_id in self.handled or not start.keep(summary):
            return True
        detail = await self._detail(server, event_id)
        if detail is None:
            self._notice(f"{event_id} is gone (deleted by retention) before it could be sent")
            self.handled.add(event_id)
            return True
        self._line_event(detail)
        done = await self._forward_one(server, local, detail)
        if done:
            self.handled.add(event_id)
            self.last_event = event_id
        return done

    async def _detail(self, server: httpx.AsyncClient, event_id: str) -> dict[str, Any] | None:
        """The event with its body and headers; retried until the server answers."""
        failures = 0
        while True:
            try:
                detail: dict[str, Any] = await api.request(server, "GET", f"/events/{event_id}")
                return detail
            except ApiError as exc:
                if exc.status == 404:
                    return None
                if exc.fatal:
                    raise Fatal(self._refused(exc)) from None
            except (httpx.HTTPError, OSError):
                pass
            failures += 1
            delay = min(self.options.backoff_max, self.options.backoff_min * failures)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self.stop.wait()
            if self.stop.is_set():
                raise _Stopped

    async def _forward_one(
        self, server: httpx.AsyncClient, local: httpx.AsyncClient, detail: dict[str, Any]
    ) -> bool:
        body = _body(detail["request_body"], detail["request_body_encoding"])
        number = 0
        held_since: float | None = None
        while True:
            number += 1
            extra = {
                "x-hookbay-event-id": detail["id"], "x-hookbay-request-id": detail["request_id"],
                "x-hookbay-attempt": str(number), "x-hookbay-listen": self.session,
            }  # fmt: skip
            headers = local_headers(detail["request_headers"], extra)
            request = local.build_request("POST", self.url, content=body, headers=headers)
            _only_given_headers(request, headers)
            started = datetime.now(UTC)
            clock = time.perf_counter()
            try:
                response = await local.send(request)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nobody answered
                if held_since is None:
                    held_since = time.monotonic()
                    self._notice(
                        f"[ERR] POST {self.url}: {_describe(exc)}; holding {detail['id']} "
                        "and retrying until the app answers"
                    )
                delay = min(HOLD_MAX, 0.25 * 2 ** min(number, 8))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self.stop.wait()
                if self.stop.is_set():
                    return False
                continue
            except httpx.HTTPError as exc:  # sent; what the app did is unknown
                self._answered(server, detail, started, clock, None, _describe(exc))
                return True
            if held_since is not None:
                self._notice(f"the app answers again (held {time.monotonic() - held_since:.0f} s)")
            self._answered(server, detail, started, clock, response, None)
            return True

    def _answered(
        self,
        server: httpx.AsyncClient,
        detail: dict[str, Any],
        started: datetime,
        clock: float,
        response: httpx.Response | None,
        error: str | None,
    ) -> None:
        latency = round((time.perf_counter() - clock) * 1000, 1)
        status = response.status_code if response is not None else None
        self.tally.forwarded += 1
        if status is None:
            self.tally.errors += 1
        elif status < 300:
            self.tally.ok += 1
        else:
            self.tally.failed += 1
        self._line_answer(detail, status, latency, error)
        if self.options.record:  # one answer per event and session (held tries never answered)
            answer = {
                "session_id": self.session, "number": 1, "url": self.url,
                "started_at": started.isoformat(), "status_code": status, "latency_ms": latency,
                "error": error[:1000] if error else None,
                "response_headers": dict(list(response.headers.items())[:50]) if response else {},
                "response_body": base64.b64encode(
                    response.content[:RECORD_BODY_LIMIT] if response else b""
                ).decode(),
            }  # fmt: skip
            task = asyncio.create_task(self._record(server, detail["id"], answer))
            self._recordings.add(task)
            task.add_done_callback(self._recordings.discard)

    async def _record(
        self, server: httpx.AsyncClient, event_id: str, answer: dict[str, Any]
    ) -> None:
        """POST the answer as a ``listen`` attempt (idempotent: tried again on failure)."""
        for attempt in range(RECORD_TRIES):
            try:
                await api.request(server, "POST", f"/events/{event_id}/attempts", json=answer)
                return
            except (ApiError, httpx.HTTPError, OSError) as exc:
                last = exc
            await asyncio.sleep(0.5 * (attempt + 1))
        if not self._record_failed:  # once: the forwarding itself goes on
            self._record_failed = True
            self._notice(
                f"could not record answers as attempts ({_describe(last)}); forwarding goes on"
            )

    async def _drain_recordings(self) -> None:
        if self._recordings:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await asyncio.gather(*self._recordings, return_exceptions=True)

    # ------------------------------------------------------------------ output

    def _line_event(self, detail: dict[str, Any]) -> None:
        if self.options.format != "text":
            return
        size = len(_body(detail["request_body"], detail["request_body_encoding"]))
        kind = detail.get("content_type") or "-"
        self._print(f"{_now()}  -->  {detail['request_id']} {_size(size)} {kind} [{detail['id']}]")

    def _line_answer(
        self, detail: dict[str, Any], status: int | None, latency: float, error: str | None
    ) -> None:
        if self.options.format == "jsonl":
            line = {
                "event_id": detail["id"], "request_id": detail["request_id"], "status": status,
                "latency_ms": latency, "error": error, "url": self.url,
                "created_at": detail["created_at"], "forwarded_at": datetime.now(UTC).isoformat(),
            }  # fmt: skip
            self._print(json.dumps(line, separators=(",", ":")))
            return
        shown = f"[{status}]" if status is not None else f"[ERR] {error};"
        self._print(f"{_now()}  <--  {shown} POST {self.url} ({latency:g} ms) [{detail['id']}]")

    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def _notice(self, text: str) -> None:
        print(f"{_now()}  ..  {text}", file=self.err, flush=True)

    def _state_change(self, state: str, text: str) -> None:
        if state != self._state:
            self._state = state
            self._notice(text)

    def _refused(self, exc: ApiError) -> str:
        if exc.status == 404:
            return f"{exc.message} (webhook {self.options.webhook!r} on {self.credentials.server})"
        return exc.message

    def _summary(self) -> None:
        t = self.tally
        resume = ""
        if self.last_event:
            resume = (
                f" Resume: hookbay listen {self.options.webhook} --forward-to "
                f"{self.options.forward_to} --since {self.last_event}"
            )
        self._notice(
            f"Stopped. {t.forwarded} forwarded ({t.ok} 2xx, {t.failed} other, {t.errors} "
            f"without an answer).{resume}"
        )


def _only_given_headers(request: httpx.Request, headers: list[tuple[str, str]]) -> None:
    """Drop the headers httpx adds by itself (Accept, Connection, User-Agent, …) that are not
    in ``headers``: the app sees what the sender sent."""
    given = {n.lower() for n, _ in headers} | {"host", "content-length"}
    for name in {n.lower() for n in request.headers}:
        if name not in given:
            del request.headers[name]


def _body(text: str, encoding: str) -> bytes:
    return base64.b64decode(text) if encoding == "base64" else text.encode("utf-8")


def _size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"


def _now() -> str:
    return datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]

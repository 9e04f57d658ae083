"""The ``hookbay`` command: the owner's CLI, a client of the dashboard API.

Exit status: 0 done (``listen``: stopped with Ctrl-C), 1 an error (one line on stderr),
2 a usage mistake or the server refused (401/403/404).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import click

# Start-up cost: `hookbay --help` must stay well under 0.3 s of CPU, so only click is imported
# here; httpx, asyncio and the command modules are imported by the commands that use them.
if TYPE_CHECKING:
    import httpx

    from hookbay_cli.config import Credentials

T = TypeVar("T")
CONTEXT = {"help_option_names": ["-h", "--help"]}


class Failure(click.ClickException):
    """One line on stderr, ``hookbay: ...``, and the exit status."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"hookbay: {self.message}", err=True)


def _run(
    work: Callable[[Credentials], Coroutine[Any, Any, T]], credentials: Credentials | None = None
) -> T:
    """Run ``work`` with the owner's credentials (the saved or given ones); API and network
    errors as one line."""
    import asyncio

    import httpx

    from hookbay_cli.api import ApiError
    from hookbay_cli.config import NotLoggedIn, load

    if credentials is None:
        try:
            credentials = load()
        except NotLoggedIn as exc:
            raise Failure(str(exc), 2) from None
    try:
        return asyncio.run(work(credentials))
    except ApiError as exc:
        raise Failure(exc.message, 2 if exc.fatal else 1) from None
    except httpx.HTTPError as exc:
        raise Failure(f"cannot reach {credentials.server}: {exc}") from None


def _emit(data: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    import json

    click.echo(json.dumps(data, indent=2) if as_json else render(data))


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, *rows]]  # fmt: skip
    return "\n".join(lines)


json_flag = click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")


@click.group(context_settings=CONTEXT)
def hookbay() -> None:
    """hookbay: your webhooks and their events, over the dashboard API.

    Log in once with `hookbay login`; HOOKBAY_SERVER and HOOKBAY_TOKEN override the saved
    values. `hookbay listen` forwards a webhook's events to your machine."""


@hookbay.command()
@click.option("--server", required=True, help="The dashboard's URL, e.g. https://hooks.example.com")
@click.option("--token", prompt=True, hide_input=True, help="An API token (hbk_...).")
def login(server: str, token: str) -> None:
    """Check SERVER and TOKEN against the API and save them (config file mode 0600)."""
    from hookbay_cli.config import Credentials, normalize_server, save

    credentials = Credentials(normalize_server(server), token.strip())

    me = _run(lambda c: _get(c, "/me"), credentials)
    path = save(credentials)
    click.echo(f"Logged in to {credentials.server} as {me['username']}; saved in {path}")


@hookbay.command()
def logout() -> None:
    """Forget the saved server and token."""
    from hookbay_cli.config import config_path, forget

    click.echo(f"Removed {config_path()}" if forget() else "Not logged in.")


@hookbay.command()
@json_flag
def whoami(as_json: bool) -> None:
    """The account the token belongs to."""
    me = _run(lambda c: _get(c, "/me"))
    _emit(me, as_json, lambda m: f"{m['username']} (plan {m.get('plan', '-')})")


async def _get(credentials: Credentials, path: str, **params: Any) -> Any:
    from hookbay_cli import api

    async with api.client(credentials) as http:
        return await api.request(http, "GET", path, params={k: v for k, v in params.items() if v})


def _q(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


# ---------------------------------------------------------------------------- webhooks


@hookbay.group()
def webhooks() -> None:
    """Your webhooks."""


@webhooks.command("list")
@json_flag
def webhooks_list(as_json: bool) -> None:
    """Every webhook: name, active, destination."""
    found = _run(lambda c: _get(c, "/webhooks"))
    rows = [[w["name"], "yes" if w.get("active") else "no", w.get("forward_url") or "-"]
            for w in found]  # fmt: skip
    _emit(found, as_json, lambda _: _table(rows, ["NAME", "ACTIVE", "FORWARD URL"]))


@webhooks.command("show")
@click.argument("name")
@json_flag
def webhooks_show(name: str, as_json: bool) -> None:
    """One webhook's settings."""
    found = _run(lambda c: _get(c, f"/webhooks/{_q(name)}"))
    _emit(found, as_json, lambda w: "\n".join(f"{k}: {v}" for k, v in w.items()))


# ---------------------------------------------------------------------------- events


@hookbay.group()
def events() -> None:
    """A webhook's events: list, show, replay, export."""


STATUS = click.Choice(["all", "success", "failed", "pending"])


@events.command("list")
@click.argument("webhook")
@click.option("--status", type=STATUS, default="all", show_default=True)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--cursor", default=None, help="next_cursor of the previous page.")
@click.option("--since", default=None, help="Received at or after (ISO 8601).")
@click.option("--until", default=None, help="Received before (ISO 8601).")
@json_flag
def events_list(
    webhook: str, status: str, limit: int, cursor: str | None, since: str | None,
    until: str | None, as_json: bool,
) -> None:  # fmt: skip
    """WEBHOOK's events, newest first."""
    path = f"/webhooks/{_q(webhook)}/events"
    query = {"status": status, "limit": limit, "cursor": cursor, "since": since, "until": until}
    page = _run(lambda c: _get(c, path, **query))

    def render(p: dict[str, Any]) -> str:
        rows = [[e["created_at"], e["id"], e["request_id"], e["status"],
                 str(e.get("last_status_code") or "-")] for e in p["items"]]  # fmt: skip
        text = _table(rows, ["RECEIVED", "ID", "REQUEST", "STATUS", "LAST"])
        if p.get("next_cursor"):
            text += f"\nmore: --cursor {p['next_cursor']}"
        return text

    _emit(page, as_json, render)


@events.command("show")
@click.argument("event_id")
@json_flag
def events_show(event_id: str, as_json: bool) -> None:
    """One event: the request as received, its status and every attempt."""
    found = _run(lambda c: _get(c, f"/events/{_q(event_id)}"))

    def render(e: dict[str, Any]) -> str:
        lines = [f"{k}: {e[k]}" for k in ("id", "request_id", "webhook_name", "created_at",
                                          "status", "forward_url")]  # fmt: skip
        lines += ["headers:"] + [f"  {k}: {v}" for k, v in e["request_headers"].items()]
        lines += [f"body ({e['request_body_encoding']}):", e["request_body"]]
        lines += ["deliveries:"] * bool(e.get("deliveries"))
        lines += [
            f"  {d['id']} {d['route']} → {d['destination']} {d['status']}"
            + (f" ({d['reason']})" if d["reason"] else "")
            for d in e.get("deliveries", [])
        ]
        lines.append("attempts:")
        for a in e["attempts"]:
            lines.append(
                f"  #{a['number']} {a['trigger']} {a['started_at']} {a['url']} "
                f"{a['status_code'] or a['error']} {a['latency_ms']} ms"
            )
        return "\n".join(lines)

    _emit(found, as_json, render)


@events.command("replay")
@click.argument("event_id")
@json_flag
def events_replay(event_id: str, as_json: bool) -> None:
    """Deliver EVENT_ID again to its webhook's destination (a new attempt chain)."""

    async def work(credentials: Credentials) -> Any:
        from hookbay_cli import api

        async with api.client(credentials) as http:
            return await api.request(http, "POST", f"/events/{_q(event_id)}/replay")

    accepted = _run(work)
    _emit(accepted, as_json, lambda a: f"replay accepted: {a}")


@events.command("retry-delivery")
@click.argument("delivery_id")
@json_flag
def events_retry_delivery(delivery_id: str, as_json: bool) -> None:
    """Send one delivery (an id from `events show`) again, alone, to its destination as it is
    now; the event's other deliveries are untouched."""
    accepted = _run(lambda c: _call(c, "POST", f"/deliveries/{_q(delivery_id)}/retry"))
    _emit(accepted, as_json, lambda a: f"retry of {a['route']} → {a['destination']}: {a['status']}")


@events.command("export")
@click.argument("webhook")
@click.option("--status", type=STATUS, default="all", show_default=True)
@click.option("--since", default=None, help="Received at or after (ISO 8601).")
@click.option("--until", default=None, help="Received before (ISO 8601).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default="-", show_default=True)
def events_export(
    webhook: str, status: str, since: str | None, until: str | None, output: str
) -> None:
    """WEBHOOK's events as one JSON array, oldest first, with bodies; streamed to OUTPUT."""

    async def work(credentials: Credentials) -> int:
        from hookbay_cli import api

        params = {k: v for k, v in {"status": status, "since": since, "until": until}.items() if v}
        path = f"/webhooks/{_q(webhook)}/events/export"
        async with (
            api.client(credentials, timeout=300) as http,
            http.stream("GET", path, params=params) as response,
        ):
            if response.status_code >= 400:
                await response.aread()
                raise api.error_of(response)
            return await _write_stream(response, output)

    written = _run(work)
    if output != "-":
        click.echo(f"{written} bytes written to {output}", err=True)


async def _write_stream(response: httpx.Response, output: str) -> int:
    import os

    written = 0
    if output == "-":
        async for chunk in response.aiter_bytes():
            sys.stdout.buffer.write(chunk)
            written += len(chunk)
        sys.stdout.buffer.flush()
        return written
    partial = f"{output}.partial"
    try:
        with open(partial, "wb") as file:  # noqa: ASYNC230 - a local file, written as it comes
            async for chunk in response.aiter_bytes():
                file.write(chunk)
                written += len(chunk)
        os.replace(partial, output)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return written


async def _call(credentials: Credentials, method: str, path: str, body: Any = None) -> Any:
    from hookbay_cli import api

    async with api.client(credentials) as http:
        return await api.request(http, method, path, json=body)


def _fields(view: dict[str, Any]) -> str:
    return "\n".join(f"{k}: {'-' if v is None else v}" for k, v in view.items())


# ---------------------------------------------------------------------------- listen


@hookbay.command()
@click.argument("webhook")
@click.option("--forward-to", "-f", required=True, help="Local URL (or just a port) to send to.")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text",
              show_default=True, help="jsonl: one JSON object per event forwarded.")  # fmt: skip
@click.option("--since", default=None,
              help="Start from an event id (after it), a time (ISO 8601) or 30s/10m/2h/7d ago; "
              "default: events from now on.")  # fmt: skip
@click.option("--skip-verify", is_flag=True, help="Do not verify the local URL's TLS certificate.")
@click.option("--timeout", type=click.FloatRange(0.1, 3600), default=30.0, show_default=True,
              help="Seconds the local app has to answer.")  # fmt: skip
@click.option("--stall-timeout", type=click.FloatRange(0.5, 3600), default=45.0,
              show_default=True, help="Seconds without data from the server before reconnecting.")  # fmt: skip
@click.option("--no-record", is_flag=True, help="Do not record the local answers as attempts.")
@click.option("--backoff-min", type=click.FloatRange(0.01, 60), default=1.0, hidden=True)
@click.option("--backoff-max", type=click.FloatRange(0.01, 3600), default=30.0, hidden=True)
def listen(
    webhook: str, forward_to: str, fmt: str, since: str | None, skip_verify: bool,
    timeout: float, stall_timeout: float, no_record: bool, backoff_min: float, backoff_max: float,
) -> None:  # fmt: skip
    """Forward WEBHOOK's events to a local URL as they arrive: the exact body and the original
    headers, so your app's own signature check passes. Resumes after network trouble and
    sleep; holds events while the app is down. Ctrl-C stops (exit 0)."""
    from hookbay_cli.listen import Fatal, Listener, ListenOptions

    options = ListenOptions(
        webhook, forward_to, format=fmt, since=since, skip_verify=skip_verify, timeout=timeout,
        stall_timeout=stall_timeout, backoff_min=backoff_min, backoff_max=backoff_max,
        record=not no_record,
    )  # fmt: skip
    try:
        code = _run(lambda c: Listener(c, options).run())
    except Fatal as exc:
        raise Failure(str(exc), 2) from None
    sys.exit(code)


# ---------------------------------------------------------------------------- issues


@hookbay.group()
def issues() -> None:
    """Your issues: destination problems, and what you did about them."""


ISSUE_STATUS = click.Choice(["open", "acknowledged", "resolved", "ignored"])


def _issue_line(i: dict[str, Any]) -> str:
    subject = i.get("destination") or i.get("transformation") or "-"
    return f"{i['id']}: {i['type']} {subject} ({i['status']}, {i['count']} seen)"


@issues.command("list")
@click.option("--status", type=ISSUE_STATUS, default=None)
@json_flag
def issues_list(status: str | None, as_json: bool) -> None:
    """Every issue, the most recently seen first."""
    found = _run(lambda c: _get(c, "/issues", status=status))
    rows = [[i["id"], i["type"], i["status"], i.get("destination") or i.get("transformation")
             or "-", str(i["count"]), i["last_seen_at"]] for i in found]  # fmt: skip
    _emit(found, as_json,
          lambda _: _table(rows, ["ID", "TYPE", "STATUS", "SUBJECT", "COUNT", "LAST SEEN"]))  # fmt: skip


def _issue_action(verb: str, past: str, doc: str) -> None:
    @issues.command(verb, help=doc)
    @click.argument("issue_id")
    @json_flag
    def command(issue_id: str, as_json: bool) -> None:
        done = _run(lambda c: _call(c, "POST", f"/issues/{_q(issue_id)}/{verb}"))
        _emit(done, as_json, lambda i: f"{past} {_issue_line(i)}")


_issue_action("acknowledge", "acknowledged", "Mark an open issue as looked at (stays quiet).")
_issue_action("resolve", "resolved", "Resolve an issue (it reopens if the problem recurs).")
_issue_action("ignore", "ignored", "Ignore an issue: no notification, no reopening.")


# ---------------------------------------------------------------------------- alert channels


@hookbay.group("alert-channels")
def alert_channels() -> None:
    """Where your issue notifications go: webhook, slack, pagerduty, email."""


def _channel_line(ch: dict[str, Any]) -> str:
    target = ch.get("url") or ch.get("to") or ch.get("events_url") or "-"
    failing = f" (failing: {ch['last_error']})" if ch.get("failing_since") else ""
    return f"{ch['id']}: {ch['type']} {target}{failing}"


@alert_channels.command("list")
@json_flag
def alert_channels_list(as_json: bool) -> None:
    """Every alert channel (secrets masked)."""
    found = _run(lambda c: _get(c, "/alert-channels"))
    _emit(found, as_json, lambda f: "\n".join(_channel_line(ch) for ch in f))


@alert_channels.command("create")
@click.option("--type", "type_", type=click.Choice(["webhook", "slack", "pagerduty", "email"]),
              required=True)  # fmt: skip
@click.option("--url", default=None, help="webhook, slack: where notifications are POSTed.")
@click.option("--secret-stdin", is_flag=True, help="webhook: read the whsec_ secret from stdin.")
@click.option("--routing-key-stdin", is_flag=True,
              help="pagerduty: read the integration key from stdin.")  # fmt: skip
@click.option("--events-url", default=None, help="pagerduty: the Events API v2 endpoint.")
@click.option("--to", default=None, help="email: the address notifications go to.")
@json_flag
def alert_channels_create(
    type_: str, url: str | None, secret_stdin: bool, routing_key_stdin: bool,
    events_url: str | None, to: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Add an alert channel. Secrets come from stdin, never from the command line."""
    body: dict[str, Any] = {"type": type_}
    for key, value in (("url", url), ("events_url", events_url), ("to", to)):
        if value is not None:
            body[key] = value
    if secret_stdin:
        body["secret"] = sys.stdin.readline().strip()
    if routing_key_stdin:
        body["routing_key"] = sys.stdin.readline().strip()
    created = _run(lambda c: _call(c, "POST", "/alert-channels", body))
    _emit(created, as_json, lambda ch: f"created {_channel_line(ch)}")


@alert_channels.command("delete")
@click.argument("channel_id")
def alert_channels_delete(channel_id: str) -> None:
    """Delete an alert channel."""
    _run(lambda c: _call(c, "DELETE", f"/alert-channels/{_q(channel_id)}"))
    click.echo(f"deleted alert channel {channel_id}")


@alert_channels.command("test")
@click.argument("channel_id")
@json_flag
def alert_channels_test(channel_id: str, as_json: bool) -> None:
    """Send a test notification now; exit 1 when the channel did not take it."""
    result = _run(lambda c: _call(c, "POST", f"/alert-channels/{_q(channel_id)}/test"))
    _emit(result, as_json, lambda r: "sent" if r["sent"] else f"not sent: {r['error']}")
    if not result["sent"]:
        sys.exit(1)


# last: the module's commands join the ``hookbay`` group (it imports the helpers above)
from hookbay_cli import gateway, transformations  # noqa: E402, F401


def main() -> None:
    hookbay(prog_name="hookbay")

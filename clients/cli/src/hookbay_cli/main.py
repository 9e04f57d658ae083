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


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise click.BadParameter(f"{text!r}: give 'Name: value'", param_hint="--header")
    return name.strip(), value.strip()


def _rate(text: str) -> dict[str, Any]:
    count, sep, period = text.partition("/")
    if not sep or not count.strip().isdigit():
        raise click.BadParameter(
            f"{text!r}: give COUNT/PERIOD, e.g. 5/second, 300/minute", param_hint="--rate"
        )
    return {"count": int(count), "period": period.strip()}


def _schedule(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _filter(text: str | None, path: str | None) -> Any:
    """The filter given as JSON text or in a file (``-``: standard input); ``None``: neither."""
    import json

    if text is not None and path is not None:
        raise click.UsageError("--filter and --filter-file exclude each other")
    if path is not None:
        text = click.open_file(path).read()
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--filter") from None


def _options(*options: Callable[..., Any]) -> Callable[..., Any]:
    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


# ---------------------------------------------------------------------------- destinations


@hookbay.group()
def destination() -> None:
    """Your destinations: where routes deliver, with their delivery controls."""


destination_controls = _options(
    click.option("--timeout", "timeout_s", type=click.IntRange(1, 60), default=None,
                 metavar="SECONDS", help="Seconds an attempt may take (default 10)."),
    click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'",
                 help="A header sent with every delivery (repeat for more; write-only)."),
    click.option("--retry-schedule", default=None, metavar="LIST",
                 help="Delays of the first attempt and each retry, e.g. 0,10s,1m,1h."),
    click.option("--rate", default=None, metavar="COUNT/PERIOD",
                 help="At most COUNT requests per second, minute or hour, e.g. 5/second."),
    click.option("--max-concurrency", type=click.IntRange(1, 64), default=None,
                 help="Deliveries in flight at once (default 10; 1: one at a time, in order)."),
)  # fmt: skip


def _destination_line(d: dict[str, Any]) -> str:
    reason = f", {d['state_reason']}" if d.get("state_reason") else ""
    return f"{d['name']}: {d['url']} ({d['state']}{reason})"


@destination.command("list")
@json_flag
def destination_list(as_json: bool) -> None:
    """Every destination: name, state, URL."""
    found = _run(lambda c: _get(c, "/destinations"))
    rows = [[d["name"], d["state"], d.get("state_reason") or "-", d["url"]] for d in found]
    _emit(found, as_json, lambda _: _table(rows, ["NAME", "STATE", "REASON", "URL"]))


@destination.command("show")
@click.argument("name")
@json_flag
def destination_show(name: str, as_json: bool) -> None:
    """One destination (header values masked)."""
    found = _run(lambda c: _get(c, f"/destinations/{_q(name)}"))
    _emit(found, as_json, _fields)


@destination.command("create")
@click.argument("name")
@click.option("--url", required=True, help="Where deliveries go (http or https).")
@destination_controls
@json_flag
def destination_create(
    name: str, url: str, timeout_s: int | None, headers: tuple[str, ...],
    retry_schedule: str | None, rate: str | None, max_concurrency: int | None, as_json: bool,
) -> None:  # fmt: skip
    """Create destination NAME."""
    body: dict[str, Any] = {"name": name, "url": url}
    if timeout_s is not None:
        body["timeout_s"] = timeout_s
    if headers:
        body["headers"] = dict(_header(h) for h in headers)
    if retry_schedule is not None:
        body["retry_schedule"] = _schedule(retry_schedule)
    if rate is not None:
        body["rate_limit"] = _rate(rate)
    if max_concurrency is not None:
        body["max_concurrency"] = max_concurrency
    created = _run(lambda c: _call(c, "POST", "/destinations", body))
    _emit(created, as_json, lambda d: f"created destination {_destination_line(d)}")


@destination.command("set")
@click.argument("name")
@click.option("--url", default=None, help="Where deliveries go.")
@destination_controls
@click.option("--no-headers", is_flag=True, help="Remove every header.")
@click.option("--default-retry-schedule", is_flag=True, help="Back to the server's schedule.")
@click.option("--no-rate", is_flag=True, help="Remove the rate limit.")
@json_flag
def destination_set(
    name: str, url: str | None, timeout_s: int | None, headers: tuple[str, ...],
    retry_schedule: str | None, rate: str | None, max_concurrency: int | None,
    no_headers: bool, default_retry_schedule: bool, no_rate: bool, as_json: bool,
) -> None:  # fmt: skip
    """Change destination NAME. --header replaces every header (a value given as '********'
    keeps that header's stored value)."""
    for given, flag, both in [
        (bool(headers), no_headers, "--header and --no-headers"),
        (retry_schedule is not None, default_retry_schedule,
         "--retry-schedule and --default-retry-schedule"),
        (rate is not None, no_rate, "--rate and --no-rate"),
    ]:  # fmt: skip
        if given and flag:
            raise click.UsageError(f"{both} exclude each other")
    body: dict[str, Any] = {}
    for key, value in (
        ("url", url),
        ("timeout_s", timeout_s),
        ("max_concurrency", max_concurrency),
    ):
        if value is not None:
            body[key] = value
    if headers or no_headers:
        body["headers"] = dict(_header(h) for h in headers)
    if retry_schedule is not None or default_retry_schedule:
        body["retry_schedule"] = _schedule(retry_schedule) if retry_schedule else None
    if rate is not None or no_rate:
        body["rate_limit"] = _rate(rate) if rate else None
    if not body:
        raise click.UsageError("nothing to change: give an option (see --help)")
    changed = _run(lambda c: _call(c, "PATCH", f"/destinations/{_q(name)}", body))
    _emit(changed, as_json, lambda d: f"updated destination {_destination_line(d)}")


@destination.command("delete")
@click.argument("name")
def destination_delete(name: str) -> None:
    """Delete destination NAME (refused while routes deliver to it)."""
    _run(lambda c: _call(c, "DELETE", f"/destinations/{_q(name)}"))
    click.echo(f"deleted destination {name}")


@destination.command("pause")
@click.argument("name")
@json_flag
def destination_pause(name: str, as_json: bool) -> None:
    """Hold NAME's deliveries (none is discarded) until it is resumed."""
    paused = _run(lambda c: _call(c, "POST", f"/destinations/{_q(name)}/pause"))
    _emit(paused, as_json, _destination_line)


@destination.command("resume")
@click.argument("name")
@json_flag
def destination_resume(name: str, as_json: bool) -> None:
    """Deliver to NAME again (also when disabled); held deliveries go out in order."""
    resumed = _run(lambda c: _call(c, "POST", f"/destinations/{_q(name)}/resume"))
    _emit(resumed, as_json, _destination_line)


# ---------------------------------------------------------------------------- routes


@hookbay.group()
def route() -> None:
    """A webhook's routes: which events go to which destination, in order."""


filter_options = _options(
    click.option("--filter", "filter_text", default=None, metavar="JSON",
                 help="Which events it takes: {\"body\": ..., \"headers\": ..., \"query\": ...}."),
    click.option("--filter-file", default=None, metavar="PATH",
                 help="The filter from a JSON file ('-': standard input)."),
)  # fmt: skip


def _route_line(r: dict[str, Any]) -> str:
    off = ", disabled" if not r["enabled"] else ""
    return f"{r['webhook']}/{r['name']} → {r['destination']} (position {r['position']}{off})"


def _routes(webhook: str, *rest: str) -> str:
    return "/".join([f"/webhooks/{_q(webhook)}/routes", *(_q(p) for p in rest)])


@route.command("list")
@click.argument("webhook")
@json_flag
def route_list(webhook: str, as_json: bool) -> None:
    """WEBHOOK's routes in order."""
    import json

    found = _run(lambda c: _get(c, _routes(webhook)))
    rows = [[str(r["position"]), r["name"], r["destination"], "yes" if r["enabled"] else "no",
             json.dumps(r["filter"]) if r["filter"] is not None else "-"] for r in found]  # fmt: skip
    _emit(found, as_json, lambda _: _table(rows, ["#", "NAME", "DESTINATION", "ENABLED", "FILTER"]))


@route.command("show")
@click.argument("webhook")
@click.argument("name")
@json_flag
def route_show(webhook: str, name: str, as_json: bool) -> None:
    """One route."""
    found = _run(lambda c: _get(c, _routes(webhook, name)))
    _emit(found, as_json, _fields)


@route.command("create")
@click.argument("webhook")
@click.argument("name")
@click.option("--destination", required=True, help="The destination's name.")
@filter_options
@click.option("--disabled", is_flag=True, help="Create it disabled.")
@click.option("--position", type=click.IntRange(min=0), default=None,
              help="Where in the order (0: first; default: last).")  # fmt: skip
@json_flag
def route_create(
    webhook: str, name: str, destination: str, filter_text: str | None,
    filter_file: str | None, disabled: bool, position: int | None, as_json: bool,
) -> None:  # fmt: skip
    """Add route NAME to WEBHOOK."""
    body: dict[str, Any] = {"name": name, "destination": destination, "enabled": not disabled}
    spec = _filter(filter_text, filter_file)
    if spec is not None:
        body["filter"] = spec
    if position is not None:
        body["position"] = position
    created = _run(lambda c: _call(c, "POST", _routes(webhook), body))
    _emit(created, as_json, lambda r: f"created route {_route_line(r)}")


@route.command("set")
@click.argument("webhook")
@click.argument("name")
@click.option("--destination", default=None, help="Deliver to another destination.")
@filter_options
@click.option("--no-filter", is_flag=True, help="Take every event.")
@click.option("--enable/--disable", "enabled", default=None, help="Turn the route on or off.")
@click.option("--position", type=click.IntRange(min=0), default=None, help="Move it (0: first).")
@json_flag
def route_set(
    webhook: str, name: str, destination: str | None, filter_text: str | None,
    filter_file: str | None, no_filter: bool, enabled: bool | None, position: int | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Change route NAME of WEBHOOK."""
    spec = _filter(filter_text, filter_file)
    if spec is not None and no_filter:
        raise click.UsageError("--filter and --no-filter exclude each other")
    body: dict[str, Any] = {}
    for key, value in (("destination", destination), ("enabled", enabled), ("position", position)):
        if value is not None:
            body[key] = value
    if spec is not None or no_filter:
        body["filter"] = spec
    if not body:
        raise click.UsageError("nothing to change: give an option (see --help)")
    changed = _run(lambda c: _call(c, "PATCH", _routes(webhook, name), body))
    _emit(changed, as_json, lambda r: f"updated route {_route_line(r)}")


@route.command("delete")
@click.argument("webhook")
@click.argument("name")
def route_delete(webhook: str, name: str) -> None:
    """Delete route NAME of WEBHOOK."""
    _run(lambda c: _call(c, "DELETE", _routes(webhook, name)))
    click.echo(f"deleted route {webhook}/{name}")


@route.command("dry-run")
@click.argument("webhook")
@click.argument("name")
@click.option("--last", type=click.IntRange(1, 100), default=50, show_default=True,
              help="How many of the newest stored events to try.")  # fmt: skip
@filter_options
@json_flag
def route_dry_run(
    webhook: str, name: str, last: int, filter_text: str | None, filter_file: str | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Which of WEBHOOK's newest events route NAME takes, and why not. With --filter, an
    unsaved route with that filter is tried instead. Nothing is delivered."""
    body: dict[str, Any] = {"last": last}
    if filter_text is not None or filter_file is not None:
        body["route"] = {"name": name, "filter": _filter(filter_text, filter_file)}
    run = _run(lambda c: _call(c, "POST", _routes(webhook, name, "dry-run"), body))

    def render(r: dict[str, Any]) -> str:
        rows = [[e["created_at"], e["event_id"], "yes" if e["matched"] else "no",
                 e["reason"] or "-"] for e in r["events"]]  # fmt: skip
        text = _table(rows, ["RECEIVED", "EVENT", "MATCHED", "WHY NOT"]) + "\n" if rows else ""
        return f"{text}{r['matched']} of {r['evaluated']} matched; nothing was delivered"

    _emit(run, as_json, render)


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
def listen(
    webhook: str, forward_to: str, fmt: str, since: str | None, skip_verify: bool,
    timeout: float, stall_timeout: float, no_record: bool, backoff_min: float,
) -> None:  # fmt: skip
    """Forward WEBHOOK's events to a local URL as they arrive: the exact body and the original
    headers, so your app's own signature check passes. Resumes after network trouble and
    sleep; holds events while the app is down. Ctrl-C stops (exit 0)."""
    from hookbay_cli.listen import Fatal, Listener, ListenOptions

    options = ListenOptions(
        webhook, forward_to, format=fmt, since=since, skip_verify=skip_verify, timeout=timeout,
        stall_timeout=stall_timeout, backoff_min=backoff_min, record=not no_record,
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


def main() -> None:
    hookbay(prog_name="hookbay")

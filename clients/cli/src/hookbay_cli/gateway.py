"""The ``hookbay destination`` and ``hookbay route`` commands: the owner's destinations and a
webhook's routes, over the dashboard API (registered on the ``hookbay`` group when
``hookbay_cli.main`` is imported)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from hookbay_cli.dedupe import dedupe_key_text, dedupe_options, dedupe_rule, dedupe_text
from hookbay_cli.main import _call, _emit, _fields, _get, _q, _run, _table, hookbay, json_flag


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


_DELAY_UNITS = {"s": 1, "m": 60, "h": 3600}


def _delay(text: str) -> int:
    """A route's delay in whole seconds: ``30s``, ``5m``, ``2h`` or a number of seconds. The
    server checks the range (0..86400)."""
    raw = text.strip().lower()
    number, unit = (raw[:-1], raw[-1]) if raw[-1:] in _DELAY_UNITS else (raw, "s")
    if not number.isdigit():
        raise click.BadParameter(
            f"{text!r}: give e.g. 30s, 5m, 2h or a number of seconds", param_hint="--delay"
        )
    return int(number) * _DELAY_UNITS[unit]


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
                 help="Deliveries in flight at once (default 20; 1: one at a time, in order)."),
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


@destination.command("retry-failed")
@click.argument("name")
@json_flag
def destination_retry_failed(name: str, as_json: bool) -> None:
    """Retry every delivery to NAME still failed, each as a new attempt chain to NAME as it is
    now (held while it is paused)."""

    async def work(credentials: Any) -> dict[str, Any]:
        path, body = f"/destinations/{_q(name)}/retry-failed", dict[str, str]()
        total: dict[str, Any] = {"destination": name, "retried": 0}
        for _ in range(10_000):  # bounded: ten million deliveries
            done = await _call(credentials, "POST", path, body)
            total["retried"] += done["retried"]
            if done["next"] is None:
                break
            body = {"after": done["next"]}
        return total

    result = _run(work)
    _emit(result, as_json, lambda r: f"retried {r['retried']} failed deliveries to {name}")


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
    off += f", delayed {r['delay_s']}s" if r.get("delay_s") else ""
    via = f" via {r['transform']}" if r.get("transform") else ""
    return f"{r['webhook']}/{r['name']}{via} → {r['destination']} (position {r['position']}{off})"


transform_option = click.option(
    "--transform", default=None, metavar="NAME",
    help="Run your transformation NAME on each delivery before it is sent.",
)  # fmt: skip
delay_option = click.option(
    "--delay", "delay_s", default=None, metavar="DELAY", type=_delay,
    help="Deliver each event this long after it arrived: 30s, 5m, 2h or seconds (up to 24h; "
    "0: at once).",
)  # fmt: skip


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
             json.dumps(r["filter"]) if r["filter"] is not None else "-",
             r.get("transform") or "-", dedupe_text(r.get("dedupe")),
             f"{r['delay_s']}s" if r.get("delay_s") else "-"]
            for r in found]  # fmt: skip
    head = ["#", "NAME", "DESTINATION", "ENABLED", "FILTER", "TRANSFORM", "DEDUPE", "DELAY"]
    _emit(found, as_json, lambda _: _table(rows, head))


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
@transform_option
@dedupe_options(removable=False)
@delay_option
@click.option("--disabled", is_flag=True, help="Create it disabled.")
@click.option("--position", type=click.IntRange(min=0), default=None,
              help="Where in the order (0: first; default: last).")  # fmt: skip
@json_flag
def route_create(
    webhook: str, name: str, destination: str, filter_text: str | None,
    filter_file: str | None, transform: str | None, dedupe_preset: str | None,
    dedupe_fields: str | None, dedupe_window: str | None, delay_s: int | None, disabled: bool,
    position: int | None, as_json: bool,
) -> None:  # fmt: skip
    """Add route NAME to WEBHOOK."""
    body: dict[str, Any] = {"name": name, "destination": destination, "enabled": not disabled}
    spec = _filter(filter_text, filter_file)
    if spec is not None:
        body["filter"] = spec
    if transform is not None:
        body["transform"] = transform
    rule = dedupe_rule(dedupe_preset, dedupe_fields, dedupe_window)
    if rule is not None:
        body["dedupe"] = rule
    if delay_s is not None:
        body["delay_s"] = delay_s
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
@transform_option
@click.option("--no-transform", is_flag=True, help="Run no transformation.")
@dedupe_options(removable=True)
@delay_option
@click.option("--enable/--disable", "enabled", default=None, help="Turn the route on or off.")
@click.option("--position", type=click.IntRange(min=0), default=None, help="Move it (0: first).")
@json_flag
def route_set(
    webhook: str, name: str, destination: str | None, filter_text: str | None,
    filter_file: str | None, no_filter: bool, transform: str | None, no_transform: bool,
    dedupe_preset: str | None, dedupe_fields: str | None, dedupe_window: str | None,
    no_dedupe: bool, delay_s: int | None, enabled: bool | None, position: int | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Change route NAME of WEBHOOK."""
    spec = _filter(filter_text, filter_file)
    if spec is not None and no_filter:
        raise click.UsageError("--filter and --no-filter exclude each other")
    body: dict[str, Any] = {}
    given = (("destination", destination), ("enabled", enabled), ("delay_s", delay_s),
             ("position", position))  # fmt: skip
    for key, value in given:
        if value is not None:
            body[key] = value
    if spec is not None or no_filter:
        body["filter"] = spec
    if transform is not None and no_transform:
        raise click.UsageError("--transform and --no-transform exclude each other")
    if transform is not None or no_transform:
        body["transform"] = transform
    rule = dedupe_rule(dedupe_preset, dedupe_fields, dedupe_window, remove=no_dedupe)
    if rule is not None or no_dedupe:
        body["dedupe"] = rule
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
                 e["reason"] or "-", dedupe_key_text(e.get("dedupe")),
                 _transformed(e.get("transform"))]
                for e in r["events"]]  # fmt: skip
        head = ["RECEIVED", "EVENT", "MATCHED", "WHY NOT", "DEDUPE KEY", "TRANSFORM"]
        text = _table(rows, head) + "\n" if rows else ""
        return f"{text}{r['matched']} of {r['evaluated']} matched; nothing was delivered"

    _emit(run, as_json, render)


def _transformed(run: dict[str, Any] | None) -> str:
    """A dry run's transformation of one event, in a word or its error."""
    if run is None:
        return "-"
    error = run.get("error")
    return "ok" if error is None else f"{error['kind']}: {error['message']}"

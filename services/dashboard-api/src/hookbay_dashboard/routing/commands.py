"""``hookbay-admin route ...``: a webhook's routes from the command line, through the same
service as the API (``hookbay_dashboard.services``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from hookbay_common.cli import CliState, Runtime, json_option, pass_state, table
from hookbay_dashboard.destinations.commands import validated
from hookbay_dashboard.routing.dedupe_options import (
    dedupe_key_text,
    dedupe_options,
    dedupe_rule,
    dedupe_text,
)

# Only click at import time: `hookbay-admin --help` loads this module (see hookbay_common.cli).
if TYPE_CHECKING:
    from rich.console import Console

    from hookbay_common.models import Webhook
    from hookbay_dashboard.routing.service import DryRun, RouteService


def _service(rt: Runtime) -> RouteService:
    from hookbay_dashboard.commands import services_for

    return services_for(rt).routes()


def route_view(webhook: Webhook, position: int) -> dict[str, Any]:
    from hookbay_dashboard.routing.schemas import RouteRead

    return RouteRead.of(webhook.routes[position], webhook.name, position).view()


def parse_filter(text: str | None, path: str | None) -> Any:
    """The filter given as JSON text or in a file (``-``: standard input)."""
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


def _emit(state: CliState, webhook: Webhook, position: int, verb: str) -> None:
    view = route_view(webhook, position)
    state.emit(
        view,
        human=lambda c: c.print(
            f"{verb} route {webhook.username}/{webhook.name}/{view['name']} → "
            f"{view['destination']} (position {position}"
            f"{', disabled' if not view['enabled'] else ''})"
        ),
    )


filter_options = [
    click.option("--filter", "filter_text", default=None, metavar="JSON",
                 help="Which events it takes: {\"body\": ..., \"headers\": ..., \"query\": ...}."),
    click.option("--filter-file", default=None, metavar="PATH",
                 help="The filter from a JSON file ('-': standard input)."),
]  # fmt: skip


class Delay(click.ParamType):
    """A route's delay: ``30s``, ``5m``, ``2h`` or whole seconds, as whole seconds."""

    name = "delay"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from hookbay_common.settings import parse_duration

        if isinstance(value, int):
            return value
        try:
            seconds = parse_duration(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a delay (use e.g. 30s, 5m, 2h or seconds)", param, ctx)
        if seconds != int(seconds):
            self.fail(f"{value!r} is not a whole number of seconds", param, ctx)
        return int(seconds)


delay_option = click.option(
    "--delay", "delay_s", type=Delay(), default=None, metavar="DELAY",
    help="Deliver each event this long after it arrived: 30s, 5m, 2h or seconds (up to 24h; "
    "0: at once).",
)  # fmt: skip


def with_filter(command: Any) -> Any:
    for option in reversed(filter_options):
        command = option(command)
    return command


@click.group()
def route() -> None:
    """A webhook's routes: which events go to which destination, in order."""


@route.command("create")
@click.argument("username")
@click.argument("webhook")
@click.argument("name")
@click.option("--destination", required=True, help="The destination's name.")
@with_filter
@click.option("--transform", default=None, metavar="NAME",
              help="Run the owner's transformation NAME on each delivery.")  # fmt: skip
@dedupe_options(removable=False)
@delay_option
@click.option("--disabled", is_flag=True, help="Create it disabled.")
@click.option("--position", type=click.IntRange(min=0), default=None,
              help="Where in the order (0: first; default: last).")  # fmt: skip
@json_option
@pass_state
def route_create(
    state: CliState, /, username: str, webhook: str, name: str, destination: str,
    filter_text: str | None, filter_file: str | None, transform: str | None,
    dedupe_preset: str | None, dedupe_fields: str | None, dedupe_window: str | None,
    delay_s: int | None, disabled: bool, position: int | None,
) -> None:  # fmt: skip
    """Add route NAME to USERNAME's WEBHOOK."""
    from hookbay_dashboard.routing.schemas import RouteCreate

    fields: dict[str, Any] = {"name": name, "destination": destination, "enabled": not disabled}
    spec = parse_filter(filter_text, filter_file)
    if spec is not None:
        fields["filter"] = spec
    if transform is not None:
        fields["transform"] = transform
    rule = dedupe_rule(dedupe_preset, dedupe_fields, dedupe_window)
    if rule is not None:
        fields["dedupe"] = rule
    if delay_s is not None:
        fields["delay_s"] = delay_s
    if position is not None:
        fields["position"] = position
    write = validated(RouteCreate, fields, "route")

    async def work(rt: Runtime) -> tuple[Webhook, int]:
        return await _service(rt).create(username, webhook, write)

    _emit(state, *state.run(work), "created")


@route.command("set")
@click.argument("username")
@click.argument("webhook")
@click.argument("name")
@click.option("--destination", default=None, help="Deliver to another destination.")
@with_filter
@click.option("--no-filter", is_flag=True, help="Take every event.")
@click.option("--transform", default=None, metavar="NAME",
              help="Run the owner's transformation NAME on each delivery.")  # fmt: skip
@click.option("--no-transform", is_flag=True, help="Run no transformation.")
@dedupe_options(removable=True)
@delay_option
@click.option("--enable/--disable", "enabled", default=None, help="Turn the route on or off.")
@click.option("--position", type=click.IntRange(min=0), default=None, help="Move it (0: first).")
@json_option
@pass_state
def route_set(
    state: CliState, /, username: str, webhook: str, name: str, destination: str | None,
    filter_text: str | None, filter_file: str | None, no_filter: bool, transform: str | None,
    no_transform: bool, dedupe_preset: str | None, dedupe_fields: str | None,
    dedupe_window: str | None, no_dedupe: bool, delay_s: int | None, enabled: bool | None,
    position: int | None,
) -> None:  # fmt: skip
    """Change a route."""
    from hookbay_dashboard.routing.schemas import RouteUpdate

    spec = parse_filter(filter_text, filter_file)
    if spec is not None and no_filter:
        raise click.UsageError("--filter and --no-filter exclude each other")
    fields: dict[str, Any] = {}
    given = (("destination", destination), ("enabled", enabled), ("delay_s", delay_s),
             ("position", position))  # fmt: skip
    for key, value in given:
        if value is not None:
            fields[key] = value
    if spec is not None or no_filter:
        fields["filter"] = spec
    if transform is not None and no_transform:
        raise click.UsageError("--transform and --no-transform exclude each other")
    if transform is not None or no_transform:
        fields["transform"] = transform
    rule = dedupe_rule(dedupe_preset, dedupe_fields, dedupe_window, remove=no_dedupe)
    if rule is not None or no_dedupe:
        fields["dedupe"] = rule
    if not fields:
        raise click.UsageError("nothing to change: give an option (see --help)")
    write = validated(RouteUpdate, fields, "route")

    async def work(rt: Runtime) -> tuple[Webhook, int]:
        return await _service(rt).change(username, webhook, name, write)

    _emit(state, *state.run(work), "updated")


@route.command("list")
@click.argument("username")
@click.argument("webhook")
@json_option
@pass_state
def route_list(state: CliState, username: str, webhook: str) -> None:
    """WEBHOOK's routes in order."""

    async def work(rt: Runtime) -> Webhook:
        return await _service(rt).webhook(username, webhook)

    hook = state.run(work)
    views = [route_view(hook, i) for i in range(len(hook.routes))]

    def human(console: Console) -> None:
        rows = [
            (v["position"], v["name"], v["destination"], "yes" if v["enabled"] else "no",
             json.dumps(v["filter"]) if v["filter"] is not None else None, v["transform"],
             dedupe_text(v["dedupe"]), f"{v['delay_s']}s" if v["delay_s"] else None)
            for v in views
        ]  # fmt: skip
        head = ("#", "NAME", "DESTINATION", "ENABLED", "FILTER", "TRANSFORM", "DEDUPE", "DELAY")
        table(console, head, rows)

    state.emit(views, human=human)


@route.command("show")
@click.argument("username")
@click.argument("webhook")
@click.argument("name")
@json_option
@pass_state
def route_show(state: CliState, username: str, webhook: str, name: str) -> None:
    """One route."""

    async def work(rt: Runtime) -> tuple[Webhook, int]:
        return await _service(rt).get(username, webhook, name)

    view = route_view(*state.run(work))

    def human(console: Console) -> None:
        for key, value in view.items():
            console.print(f"{key}: {'-' if value is None else value}")

    state.emit(view, human=human)


@route.command("delete")
@click.argument("username")
@click.argument("webhook")
@click.argument("name")
@json_option
@pass_state
def route_delete(state: CliState, username: str, webhook: str, name: str) -> None:
    """Delete a route."""

    async def work(rt: Runtime) -> None:
        await _service(rt).delete(username, webhook, name)

    state.run(work)
    state.emit(
        {"username": username, "webhook": webhook, "name": name, "deleted": True},
        human=lambda c: c.print(f"deleted route {username}/{webhook}/{name}"),
    )


@route.command("dry-run")
@click.argument("username")
@click.argument("webhook")
@click.argument("name")
@click.option("--last", type=click.IntRange(1, 100), default=50, show_default=True,
              help="How many of the newest stored events to try.")  # fmt: skip
@with_filter
@json_option
@pass_state
def route_dry_run(
    state: CliState, /, username: str, webhook: str, name: str, last: int,
    filter_text: str | None, filter_file: str | None,
) -> None:  # fmt: skip
    """Which of WEBHOOK's newest events route NAME takes, and why not. With --filter, an
    unsaved route with that filter is tried instead. Nothing is delivered."""
    from hookbay_dashboard.routing.schemas import DryRunDedupe, RouteDraft

    spec = parse_filter(filter_text, filter_file)
    given = filter_text is not None or filter_file is not None
    draft = validated(RouteDraft, {"name": name, "filter": spec}, "route") if given else None

    async def work(rt: Runtime) -> DryRun:
        return await _service(rt).dry_run(username, webhook, name, last=last, draft=draft)

    run = state.run(work)
    rule = run.dedupe
    events: list[dict[str, Any]] = [
        {"event_id": e.id, "request_id": e.request_id, "created_at": e.created_at,
         "matched": v.matched, "reason": v.reason, "pointer": v.pointer,
         "dedupe": DryRunDedupe.of(rule, e).model_dump() if rule and v.matched else None}
        for e, v in run.results
    ]  # fmt: skip
    matched = sum(1 for e in events if e["matched"])
    data = {
        "webhook": run.webhook.name, "route": run.route, "saved": run.saved,
        "evaluated": len(events), "matched": matched, "events": events,
    }  # fmt: skip

    def human(console: Console) -> None:
        rows = [(e["created_at"], e["event_id"], "yes" if e["matched"] else "no", e["reason"],
                 dedupe_key_text(e["dedupe"])) for e in events]  # fmt: skip
        table(console, ("RECEIVED", "EVENT", "MATCHED", "WHY NOT", "DEDUPE KEY"), rows)
        console.print(f"{matched} of {len(events)} matched; nothing was delivered")

    state.emit(data, human=human)

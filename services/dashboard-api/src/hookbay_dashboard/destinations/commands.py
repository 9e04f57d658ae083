"""``hookbay-admin destination ...``: an owner's destinations from the command line, through the
same service as the API (``hookbay_dashboard.services``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from hookbay_common.cli import CliState, Runtime, json_option, pass_state, table

# Only click at import time: `hookbay-admin --help` loads this module (see hookbay_common.cli).
if TYPE_CHECKING:
    from rich.console import Console

    from hookbay_common.models import Destination
    from hookbay_dashboard.destinations.service import DestinationService


def _service(rt: Runtime) -> DestinationService:
    from hookbay_dashboard.commands import services_for

    return services_for(rt).destinations()


def destination_view(destination: Destination) -> dict[str, Any]:
    from hookbay_dashboard.destinations.schemas import DestinationRead

    return DestinationRead.of(destination).view()


def parse_header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise click.BadParameter(f"{text!r}: give 'Name: value'", param_hint="--header")
    return name.strip(), value.strip()


def parse_rate(text: str) -> dict[str, Any]:
    count, sep, period = text.partition("/")
    if not sep or not count.strip().isdigit():
        raise click.BadParameter(
            f"{text!r}: give COUNT/PERIOD, e.g. 5/second, 300/minute", param_hint="--rate"
        )
    return {"count": int(count), "period": period.strip()}


def _schedule(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def validated(model: type[Any], fields: dict[str, Any], what: str) -> Any:
    """``model`` built from a command's options, or one line naming every refused field
    (``invalid <what>: …``)."""
    from pydantic import ValidationError

    from hookbay_common.errors import InvalidRequest

    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidRequest(f"invalid {what}: {problems}") from None


def _emit(state: CliState, destination: Destination, verb: str) -> None:
    view = destination_view(destination)
    state.emit(
        view,
        human=lambda c: c.print(
            f"{verb} destination {destination.username}/{destination.name}: {view['url']} "
            f"({view['state']})"
        ),
    )


def _show(console: Console, view: dict[str, Any]) -> None:
    for key, value in view.items():
        console.print(f"{key}: {'-' if value is None else value}")


@click.group()
def destination() -> None:
    """Destinations: where routes deliver, with their delivery controls."""


controls = [
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
]  # fmt: skip


def control_options(command: Any) -> Any:
    for option in reversed(controls):
        command = option(command)
    return command


@destination.command("create")
@click.argument("username")
@click.argument("name")
@click.option("--url", required=True, help="Where deliveries go (http or https).")
@control_options
@json_option
@pass_state
def destination_create(
    state: CliState, /, username: str, name: str, url: str, timeout_s: int | None,
    headers: tuple[str, ...], retry_schedule: str | None, rate: str | None,
    max_concurrency: int | None,
) -> None:  # fmt: skip
    """Create destination NAME for USERNAME."""
    from hookbay_dashboard.destinations.schemas import DestinationCreate

    fields: dict[str, Any] = {"name": name, "url": url}
    if timeout_s is not None:
        fields["timeout_s"] = timeout_s
    if headers:
        fields["headers"] = dict(parse_header(h) for h in headers)
    if retry_schedule is not None:
        fields["retry_schedule"] = _schedule(retry_schedule)
    if rate is not None:
        fields["rate_limit"] = parse_rate(rate)
    if max_concurrency is not None:
        fields["max_concurrency"] = max_concurrency
    write = validated(DestinationCreate, fields, "destination")

    async def work(rt: Runtime) -> Destination:
        return await _service(rt).create(username, write)

    _emit(state, state.run(work), "created")


@destination.command("set")
@click.argument("username")
@click.argument("name")
@click.option("--url", default=None, help="Where deliveries go.")
@control_options
@click.option("--no-headers", is_flag=True, help="Remove every header.")
@click.option("--default-retry-schedule", is_flag=True, help="Back to the installation's schedule.")
@click.option("--no-rate", is_flag=True, help="Remove the rate limit.")
@json_option
@pass_state
def destination_set(
    state: CliState, /, username: str, name: str, url: str | None, timeout_s: int | None,
    headers: tuple[str, ...], retry_schedule: str | None, rate: str | None,
    max_concurrency: int | None, no_headers: bool, default_retry_schedule: bool, no_rate: bool,
) -> None:  # fmt: skip
    """Change a destination. --header replaces every header (a value given as '********'
    keeps that header's stored value)."""
    from hookbay_dashboard.destinations.schemas import DestinationUpdate

    for given, flag, other in [
        (bool(headers), no_headers, "--header and --no-headers"),
        (retry_schedule is not None, default_retry_schedule,
         "--retry-schedule and --default-retry-schedule"),
        (rate is not None, no_rate, "--rate and --no-rate"),
    ]:  # fmt: skip
        if given and flag:
            raise click.UsageError(f"{other} exclude each other")
    fields: dict[str, Any] = {}
    for key, value in (
        ("url", url),
        ("timeout_s", timeout_s),
        ("max_concurrency", max_concurrency),
    ):
        if value is not None:
            fields[key] = value
    if headers or no_headers:
        fields["headers"] = dict(parse_header(h) for h in headers)
    if retry_schedule is not None or default_retry_schedule:
        fields["retry_schedule"] = _schedule(retry_schedule) if retry_schedule else None
    if rate is not None or no_rate:
        fields["rate_limit"] = parse_rate(rate) if rate else None
    if not fields:
        raise click.UsageError("nothing to change: give an option (see --help)")
    write = validated(DestinationUpdate, fields, "destination")

    async def work(rt: Runtime) -> Destination:
        return await _service(rt).change(username, name, write)

    _emit(state, state.run(work), "updated")


@destination.command("list")
@click.argument("username")
@json_option
@pass_state
def destination_list(state: CliState, username: str) -> None:
    """USERNAME's destinations."""

    async def work(rt: Runtime) -> list[Destination]:
        return await _service(rt).list_for_owner(username)

    views = [destination_view(d) for d in state.run(work)]

    def human(console: Console) -> None:
        rows = [
            (v["name"], v["state"], v["state_reason"], v["url"], v["max_concurrency"],
             f"{v['rate_limit']['count']}/{v['rate_limit']['period']}" if v["rate_limit"] else None)
            for v in views
        ]  # fmt: skip
        table(console, ("NAME", "STATE", "REASON", "URL", "CONCURRENCY", "RATE"), rows)

    state.emit(views, human=human)


@destination.command("show")
@click.argument("username")
@click.argument("name")
@json_option
@pass_state
def destination_show(state: CliState, username: str, name: str) -> None:
    """One destination (header values masked)."""

    async def work(rt: Runtime) -> Destination:
        return await _service(rt).get(username, name)

    view = destination_view(state.run(work))
    state.emit(view, human=lambda c: _show(c, view))


@destination.command("delete")
@click.argument("username")
@click.argument("name")
@json_option
@pass_state
def destination_delete(state: CliState, username: str, name: str) -> None:
    """Delete a destination no route delivers to."""

    async def work(rt: Runtime) -> None:
        await _service(rt).delete(username, name)

    state.run(work)
    state.emit(
        {"username": username, "name": name, "deleted": True},
        human=lambda c: c.print(f"deleted destination {username}/{name}"),
    )


def _state_change(verb: str, past: str) -> Callable[..., None]:
    """``pause`` or ``resume``: the service's method of that name, the destination shown after."""

    @click.argument("username")
    @click.argument("name")
    @json_option
    @pass_state
    def command(state: CliState, username: str, name: str) -> None:
        async def work(rt: Runtime) -> Destination:
            changed: Destination = await getattr(_service(rt), verb)(username, name)
            return changed

        _emit(state, state.run(work), past)

    return command


destination.command(
    "pause", help="Hold the destination's deliveries (none is discarded) until it is resumed."
)(_state_change("pause", "paused"))
destination.command(
    "resume", help="Deliver again (also a disabled destination); held deliveries go out in order."
)(_state_change("resume", "resumed"))

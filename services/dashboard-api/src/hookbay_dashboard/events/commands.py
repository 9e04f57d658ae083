"""``hookbay-admin events list|replay|export`` and ``hookbay-admin tail``: events from the command line.

Like the other ``hookbay-admin`` commands they work on the database directly (``CliState.run``), with
the owners' services built as the API builds them (``hookbay_dashboard.services``): the same
rules, errors and output shapes as the dashboard API.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import click

from hookbay_common.cli import CliState, Runtime, json_option, pass_state, table

# Only click at import time: `hookbay-admin --help` loads this module (see hookbay_common.cli).
if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from hookbay_common.models import EventHead
    from hookbay_dashboard.events.schemas import EventPage
    from hookbay_dashboard.events.service import EventService, ExportStream
    from hookbay_dashboard.replays.schemas import ReplayAccepted

LIST_MAX: Final = 1000
"""The largest ``--limit`` (the API's own cap is ``HOOKBAY_EVENTS_PAGE_MAX``)."""

status_option = click.option(
    "--status",
    type=click.Choice(["all", "success", "failed", "pending"]),  # StatusFilter's values
    default="all",
    show_default=True,
    help="Only events with this status.",
)


def _event_service(rt: Runtime) -> EventService:
    from hookbay_dashboard.commands import services_for

    return services_for(rt).events()


@click.group()
def events() -> None:
    """A webhook's events: list, replay, export."""


@events.command("list")
@click.argument("username")
@click.argument("name")
@status_option
@click.option("--limit", type=click.IntRange(1, LIST_MAX), default=50, show_default=True)
@click.option("--cursor", default=None, help="next_cursor of the previous page.")
@json_option
@pass_state
def events_list(
    state: CliState, username: str, name: str, status: str, limit: int, cursor: str | None
) -> None:
    """List the events of USERNAME's webhook NAME, newest first, a page at a time."""

    from hookbay_common.clock import isoformat
    from hookbay_dashboard.events.schemas import StatusFilter

    async def work(rt: Runtime) -> EventPage:
        return await _event_service(rt).page(
            username, name, status=StatusFilter(status), limit=limit, cursor=cursor
        )

    page = state.run(work)

    def human(console: Console) -> None:
        columns = ("TIME", "ID", "REQUEST ID", "STATUS", "CONTENT TYPE")
        rows = [
            (isoformat(e.created_at), e.id, e.request_id, e.status.value, e.content_type)
            for e in page.items
        ]
        _widen(console, columns, rows)
        table(console, columns, rows)
        if page.next_cursor is not None:
            console.print(f"more: --cursor {page.next_cursor}")

    state.emit(page.model_dump(mode="json"), human=human)


def _widen(console: Console, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Make room for the whole table: ids are copied from it, so rich must not shorten them
    to the terminal's (or a pipe's 80 columns') width; a narrow terminal wraps the lines."""
    cells = [columns, *([("-" if c is None else str(c)) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    console.width = max(console.width, sum(widths) + 2 * (len(widths) - 1))


@events.command("replay")
@click.argument("event_id")
@json_option
@pass_state
def events_replay(state: CliState, event_id: str) -> None:
    """Deliver event EVENT_ID again, to its webhook's current forward URL (a new attempt chain,
    queued on Kafka; the forwarder makes the attempts)."""

    from hookbay_dashboard.commands import services_for
    from hookbay_dashboard.replays.service import ReplayPublisher

    async def work(rt: Runtime) -> ReplayAccepted:
        producer = await rt.kafka.get()
        publisher = ReplayPublisher(lambda: producer, rt.settings.topics)
        return await services_for(rt).replays(publisher).replay_event(event_id, username=None)

    accepted = state.run(work)
    state.emit(
        accepted.model_dump(mode="json"),
        human=lambda c: c.print(
            f"queued replay of {accepted.event_id} to "
            f"{_replay_targets(accepted.url, accepted.routes)} (chain {accepted.chain_id})"
        ),
    )


@events.command("export")
@click.argument("username")
@click.argument("name")
@status_option
@click.option(
    "--output", "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write to this file (replaced only once the export is complete) instead of stdout.",
)  # fmt: skip
@json_option
@pass_state
def events_export(
    state: CliState, username: str, name: str, status: str, output: Path | None
) -> None:
    """Write the events of USERNAME's webhook NAME as one JSON array, oldest first, each event
    with its headers and body (as in the dashboard's export). With --output and a terminal on
    stderr, a progress bar shows there; with --output and --json, a summary on stdout."""
    from hookbay_dashboard.events.schemas import StatusFilter

    show_progress = output is not None and sys.stderr.isatty()

    async def work(rt: Runtime) -> tuple[int, int]:
        service = _event_service(rt)
        stream = await service.open_export(username, name, StatusFilter(status))
        if output is None:
            return await _copy(stream, sys.stdout.buffer, None)
        total = await service.count(username, name, StatusFilter(status)) if show_progress else 0
        with _progress(show_progress, total) as progress, _replacing(output) as sink:
            return await _copy(stream, sink, progress)

    written, size = state.run(work)
    if output is not None and state.json:
        state.emit({"output": str(output), "events": written, "bytes": size}, human=_silent)


def _silent(_: Console) -> None:
    return None


async def _copy(
    stream: ExportStream, sink: IO[bytes], progress: Progress | None
) -> tuple[int, int]:
    """Write every chunk of ``stream`` to ``sink``; (events, bytes) written."""
    size = 0
    shown = 0
    async for chunk in stream:
        sink.write(chunk)
        size += len(chunk)
        if progress is not None:
            progress.advance(progress.task_ids[0], stream.exported - shown)
            shown = stream.exported
    sink.flush()
    return stream.exported, size


@contextlib.contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Progress | None]:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("exporting"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=False,
    )  # fmt: skip
    progress.add_task("export", total=total or None)
    with progress:
        yield progress


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[IO[bytes]]:
    """A file that becomes ``path`` only when the block completes; a failed export leaves an
    existing ``path`` as it was and no partial file behind."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("wb") as sink:
            yield sink
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


@click.command()
@click.argument("username")
@click.argument("name")
@json_option
@pass_state
def tail(state: CliState, username: str, name: str) -> None:
    """Follow new events of USERNAME's webhook NAME live: one line per event as it is recorded,
    and again when its status changes (with --json, one JSON object per line), until Ctrl-C."""
    from hookbay_dashboard.commands import services_for
    from hookbay_dashboard.settings import DashboardSettings

    poll_interval = state.settings_of(DashboardSettings).tail_poll_interval

    async def work(rt: Runtime) -> None:
        tails = services_for(rt).tails(poll_interval=poll_interval)
        followed = await tails.follow(username, name)
        click.echo(f"following {username}/{name}; Ctrl-C to stop", err=True)
        async for item in followed:  # a status change prints the event's line again
            if item.event is not None:
                click.echo(_tail_line(item.event, as_json=state.json))

    # Ctrl-C is how a tail ends: asyncio.run cancels the work (closing the database client)
    # and re-raises the interrupt, which is a normal exit here.
    with contextlib.suppress(KeyboardInterrupt):
        state.run(work)


def _tail_line(event: EventHead, *, as_json: bool) -> str:
    from hookbay_dashboard.tail.service import summarize

    view: dict[str, Any] = summarize(event).model_dump(mode="json")
    if as_json:
        return json.dumps(view, separators=(",", ":"))
    cells = [view["created_at"], view["id"], view["request_id"], view["status"]]
    cells += [view["content_type"] or "-", view["client_ip"]]
    return "  ".join(cells)


def _replay_targets(url: str | None, routes: list[str]) -> str:
    targets = [url] if url else []
    if routes:
        targets.append(f"routes {', '.join(routes)}")
    return " and ".join(targets)

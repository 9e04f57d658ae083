"""``hookbay-admin issue ...`` and ``hookbay-admin alert-channel ...``: an owner's issues and
alert channels from the command line, through the same services as the API. A command that
notifies (``issue resolve``, ``alert-channel test``) tries each channel once and waits for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from hookbay_common.cli import CliState, Runtime, json_option, pass_state, table

# Only click at import time: `hookbay-admin --help` loads this module (see hookbay_common.cli).
if TYPE_CHECKING:
    from rich.console import Console

    from hookbay_common.models import AlertChannel, Issue
    from hookbay_dashboard.services import Services

T = TypeVar("T")
ISSUE_STATUSES = ("open", "acknowledged", "resolved", "ignored")
CHANNEL_TYPES = ("webhook", "slack", "pagerduty", "email")


@asynccontextmanager
async def _alerting(rt: Runtime) -> AsyncIterator[Services]:
    """The services with a notifier that tries once; every notification sent on leaving."""
    import httpx

    from hookbay_dashboard.runtime import build_notifier
    from hookbay_dashboard.services import Services, Stores

    stores = Stores.open(rt.db, rt.box)
    async with httpx.AsyncClient(timeout=10.0) as http:
        notifier = build_notifier(stores, rt.settings, http, None, backoff=())
        yield Services(stores, rt.settings, rt.plans, config=rt.config, notifier=notifier)
        await notifier.idle()


def _with(work: Callable[[Services], Awaitable[T]]) -> Callable[[Runtime], Awaitable[T]]:
    async def run(rt: Runtime) -> T:
        async with _alerting(rt) as services:
            return await work(services)

    return run


def issue_view(issue: Issue) -> dict[str, Any]:
    from hookbay_dashboard.issues.schemas import IssueRead

    return IssueRead.of(issue).view()


def channel_view(channel: AlertChannel) -> dict[str, Any]:
    from hookbay_dashboard.alerts.schemas import AlertChannelRead

    return AlertChannelRead.of(channel).view()


@click.group()
def issue() -> None:
    """Issues: an owner's destination problems, and their lifecycle."""


@issue.command("list")
@click.argument("username")
@click.option("--status", type=click.Choice(ISSUE_STATUSES), default=None)
@json_option
@pass_state
def issue_list(state: CliState, username: str, status: str | None) -> None:
    """USERNAME's issues, the most recently seen first."""
    from hookbay_common.models import IssueStatus

    wanted = IssueStatus(status) if status else None
    views = [
        issue_view(i)
        for i in state.run(_with(lambda s: s.issues().list_for_owner(username, wanted)))
    ]

    def human(console: Console) -> None:
        rows = [
            (v["id"], v["type"], v["status"], v["destination"] or v["transformation"],
             v["count"], v["last_seen_at"].isoformat(), v["reason"])
            for v in views
        ]  # fmt: skip
        table(console, ("ID", "TYPE", "STATUS", "SUBJECT", "COUNT", "LAST SEEN", "REASON"), rows)

    state.emit(views, human=human)


def _issue_action(verb: str, past: str) -> Callable[..., None]:
    @click.argument("username")
    @click.argument("issue_id")
    @json_option
    @pass_state
    def command(state: CliState, username: str, issue_id: str) -> None:
        found = state.run(_with(lambda s: getattr(s.issues(), verb)(username, issue_id)))
        view = issue_view(found)
        state.emit(view, human=lambda c: c.print(f"{past} issue {view['id']} ({view['status']})"))

    return command


issue.command(
    "acknowledge", help="Mark an open issue as being looked at (recurrences stay quiet)."
)(_issue_action("acknowledge", "acknowledged"))
issue.command("resolve", help="Resolve an issue (it reopens if the problem recurs).")(
    _issue_action("resolve", "resolved")
)
issue.command("ignore", help="Ignore an issue: no notification, no reopening.")(
    _issue_action("ignore", "ignored")
)


@click.group("alert-channel")
def alert_channel() -> None:
    """Alert channels: where an owner's issue notifications go."""


@alert_channel.command("list")
@click.argument("username")
@json_option
@pass_state
def channel_list(state: CliState, username: str) -> None:
    """USERNAME's alert channels (secrets masked)."""
    views = [
        channel_view(c)
        for c in state.run(_with(lambda s: s.alert_channels().list_for_owner(username)))
    ]

    def human(console: Console) -> None:
        rows = [
            (v["id"], v["type"], v["url"] or v["to"] or v["events_url"] or "-",
             v["last_error"] or "-")
            for v in views
        ]  # fmt: skip
        table(console, ("ID", "TYPE", "TARGET", "LAST ERROR"), rows)

    state.emit(views, human=human)


@alert_channel.command("create")
@click.argument("username")
@click.option("--type", "type_", type=click.Choice(CHANNEL_TYPES), required=True)
@click.option("--url", default=None, help="webhook, slack: where notifications are POSTed.")
@click.option("--secret-stdin", is_flag=True,
              help="webhook: read the whsec_ signing secret from stdin.")  # fmt: skip
@click.option("--routing-key-stdin", is_flag=True,
              help="pagerduty: read the integration key from stdin.")  # fmt: skip
@click.option("--events-url", default=None, help="pagerduty: the Events API v2 endpoint.")
@click.option("--to", default=None, help="email: the address notifications go to.")
@json_option
@pass_state
def channel_create(
    state: CliState, /, username: str, type_: str, url: str | None, secret_stdin: bool,
    routing_key_stdin: bool, events_url: str | None, to: str | None,
) -> None:  # fmt: skip
    """Add an alert channel for USERNAME. Secrets come from stdin, never from the command
    line (where the process list would show them)."""
    import sys

    from hookbay_dashboard.alerts.schemas import AlertChannelCreate
    from hookbay_dashboard.destinations.commands import validated

    fields: dict[str, Any] = {"type": type_}
    for key, value in (("url", url), ("events_url", events_url), ("to", to)):
        if value is not None:
            fields[key] = value
    if secret_stdin:
        fields["secret"] = sys.stdin.readline().strip()
    if routing_key_stdin:
        fields["routing_key"] = sys.stdin.readline().strip()
    write = validated(AlertChannelCreate, fields, "alert channel")
    created = state.run(_with(lambda s: s.alert_channels().create(username, write)))
    view = channel_view(created)
    state.emit(view, human=lambda c: c.print(f"created {view['type']} alert channel {view['id']}"))


@alert_channel.command("delete")
@click.argument("username")
@click.argument("channel_id")
@json_option
@pass_state
def channel_delete(state: CliState, username: str, channel_id: str) -> None:
    """Delete an alert channel."""
    state.run(_with(lambda s: s.alert_channels().delete(username, channel_id)))
    state.emit(
        {"id": channel_id, "deleted": True},
        human=lambda c: c.print(f"deleted alert channel {channel_id}"),
    )


@alert_channel.command("test")
@click.argument("username")
@click.argument("channel_id")
@json_option
@pass_state
def channel_test(state: CliState, username: str, channel_id: str) -> None:
    """Send a test notification now; exit 1 when the channel did not take it."""
    error = state.run(_with(lambda s: s.alert_channels().test(username, channel_id)))
    result = {"sent": error is None, "error": error}
    state.emit(
        result,
        human=lambda c: c.print("sent" if error is None else f"not sent: {error}"),
    )
    if error is not None:
        raise SystemExit(1)

"""Issues and their notifications end to end on the real store, to real local sinks: an HTTP
receiver playing the webhook, Slack and PagerDuty endpoints, and an aiosmtpd SMTP server.
Time is injected (the tracker's clock, the notifier's back-off sleep); nothing sleeps."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session
from standardwebhooks.webhooks import Webhook

from hookbay_common.alerts import (
    IssueTracker,
    Notification,
    Notifier,
    Senders,
    SmtpSettings,
    new_secret,
)
from hookbay_common.db import AlertChannelRepository, Database, IssueRepository
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import (
    AlertChannel,
    AlertChannelType,
    IssueStatus,
    IssueType,
    Notified,
)
from hookbay_common.secrets_box import SecretBox
from hookbay_dev.http import async_client
from tests.support.factories import unique_name
from tests.support.net import free_port
from tests.support.receiver import Received, Receiver, Reply

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


class Mailbox:
    """aiosmtpd's handler: every message accepted, kept."""

    def __init__(self) -> None:
        self.messages: list[tuple[Envelope, Message]] = []

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        assert isinstance(envelope.content, bytes)
        self.messages.append((envelope, message_from_bytes(envelope.content)))
        return "250 OK"

    def to(self, address: str) -> list[Message]:
        return [m for e, m in self.messages if address in e.rcpt_tos]


@pytest.fixture(scope="module")
def smtp() -> Iterator[tuple[Mailbox, str]]:
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield mailbox, f"smtp://127.0.0.1:{port}"
    finally:
        controller.stop()


@dataclass
class Alerting:
    username: str
    channels: AlertChannelRepository
    issues: IssueRepository
    notifier: Notifier
    tracker: IssueTracker
    receiver: Receiver
    mailbox: Mailbox
    clock: list[datetime]
    slept: list[float] = field(default_factory=list)
    on_sleep: list[Any] = field(default_factory=list)

    def at(self, delta: timedelta) -> None:
        self.clock[0] = T0 + delta

    async def channel(self, type_: AlertChannelType, **fields: Any) -> AlertChannel:
        channel = AlertChannel.model_validate(
            {"id": new_id(IdPrefix.ALERT_CHANNEL), "username": self.username, "type": type_,
             "created_at": T0, **fields}
        )  # fmt: skip
        return await self.channels.create(channel)

    async def occurred(self, **extra: Any) -> Any:
        issue = await self.tracker.occurred(
            self.username, IssueType.DELIVERY, destination="billing", reason="breaker", **extra
        )
        await self.notifier.idle()
        return issue

    async def cleared(self) -> Any:
        issue = await self.tracker.clear(self.username, IssueType.DELIVERY, destination="billing")
        await self.notifier.idle()
        return issue


@pytest.fixture
async def alerting(
    db: Database, receiver: Receiver, smtp: tuple[Mailbox, str]
) -> AsyncIterator[Alerting]:
    mailbox, smtp_url = smtp
    box = SecretBox("test-secret-key-of-enough-length-0123456789")
    channels, issues = AlertChannelRepository(db, box), IssueRepository(db)
    clock = [T0]
    async with async_client(timeout=5.0) as http:
        senders = Senders(http, smtp=SmtpSettings(smtp_url, "alerts@hookbay.test"), timeout=5.0)
        holder: list[Alerting] = []

        async def sleep(seconds: float) -> None:
            holder[0].slept.append(seconds)
            for hook in holder[0].on_sleep:
                await hook()

        notifier = Notifier(channels, senders, backoff=(10, 60), sleep=sleep, now=lambda: clock[0])
        tracker = IssueTracker(issues, notifier, now=lambda: clock[0])
        holder.append(
            Alerting(
                unique_name("u"), channels, issues, notifier, tracker, receiver, mailbox, clock
            )
        )
        yield holder[0]
        await notifier.close()


def types_of(received: list[Received]) -> list[str]:
    return [json.loads(r.body)["type"] for r in received]


async def every_channel(a: Alerting) -> tuple[dict[str, str], str]:
    urls = {"webhook": a.receiver.url(), "slack": a.receiver.url(), "pagerduty": a.receiver.url()}
    secret = new_secret()
    await a.channel(AlertChannelType.WEBHOOK, url=urls["webhook"], secret=secret)
    await a.channel(AlertChannelType.SLACK, url=urls["slack"])
    await a.channel(
        AlertChannelType.PAGERDUTY, routing_key="pd-key-1", events_url=urls["pagerduty"]
    )
    await a.channel(AlertChannelType.EMAIL, to=f"{a.username}@example.com")
    return urls, secret


class TestOneNotificationPerTransition:
    async def test_opened_counted_silently_then_resolved_on_every_channel(
        self, alerting: Alerting
    ) -> None:
        a = alerting
        urls, secret = await every_channel(a)
        for minute in range(4):
            a.at(timedelta(minutes=minute))
            issue = await a.occurred(event_id=f"evt_{minute}")
        assert (issue.count, issue.status, issue.sample_event_id) == (4, IssueStatus.OPEN, "evt_3")
        a.at(timedelta(minutes=5))
        resolved = await a.cleared()
        assert resolved is not None
        assert (resolved.status, resolved.resolved_at) == (
            IssueStatus.RESOLVED,
            T0 + timedelta(minutes=5),
        )

        hooks = a.receiver.received(urls["webhook"])
        assert types_of(hooks) == ["issue.opened", "issue.resolved"]
        verifier = Webhook(secret)
        for hook in hooks:
            headers = {k.decode(): v.decode() for k, v in hook.headers}
            payload = verifier.verify(hook.body, headers)
            assert payload["issue"]["id"] == issue.id
            assert payload["issue"]["destination"] == "billing"
            assert "username" not in payload["issue"]
        assert len({h.header("webhook-id") for h in hooks}) == 2

        slack = [json.loads(r.body) for r in a.receiver.received(urls["slack"])]
        assert [m["text"] for m in slack] == [
            "hookbay: delivery issue opened for billing (breaker)",
            "hookbay: delivery issue resolved for billing (breaker)",
        ]
        pd = [json.loads(r.body) for r in a.receiver.received(urls["pagerduty"])]
        assert [(e["event_action"], e["dedup_key"], e["routing_key"]) for e in pd] == [
            ("trigger", issue.id, "pd-key-1"), ("resolve", issue.id, "pd-key-1"),
        ]  # fmt: skip
        assert pd[0]["payload"]["severity"] == "error"
        mails = a.mailbox.to(f"{a.username}@example.com")
        assert [m["Subject"] for m in mails] == [
            "hookbay: delivery issue opened for billing (breaker)",
            "hookbay: delivery issue resolved for billing (breaker)",
        ]
        assert mails[0]["From"] == "alerts@hookbay.test"
        assert issue.id in mails[0].get_payload()

    async def test_racing_first_occurrences_open_one_issue_told_once(
        self, alerting: Alerting
    ) -> None:
        a = alerting
        url = a.receiver.url()
        await a.channel(AlertChannelType.SLACK, url=url)
        await asyncio.gather(*[a.tracker.occurred(a.username, IssueType.DELIVERY,
                                                  destination="billing") for _ in range(8)])  # fmt: skip
        await a.notifier.idle()
        assert len(await a.issues.list_for_owner(a.username)) == 1  # the unique (owner, key)
        assert len(a.receiver.received(url)) == 1


class TestReopen:
    async def test_a_recurrence_after_the_damping_window_reopens_and_tells(
        self, alerting: Alerting
    ) -> None:
        a = alerting
        url = a.receiver.url()
        await a.channel(AlertChannelType.WEBHOOK, url=url, secret=new_secret())
        first = await a.occurred()
        a.at(timedelta(minutes=1))
        await a.cleared()
        a.at(timedelta(minutes=12))
        again = await a.occurred()
        assert (again.id, again.status, again.opened_at) == (
            first.id, IssueStatus.OPEN, T0 + timedelta(minutes=12),
        )  # fmt: skip
        assert types_of(a.receiver.received(url)) == [
            "issue.opened", "issue.resolved", "issue.reopened",
        ]  # fmt: skip

    async def test_a_flap_within_the_window_is_told_once_the_window_passed(
        self, alerting: Alerting
    ) -> None:
        a = alerting
        url = a.receiver.url()
        await a.channel(AlertChannelType.WEBHOOK, url=url, secret=new_secret())
        await a.occurred()
        a.at(timedelta(minutes=1))
        await a.cleared()  # told: resolved at minute 1
        a.at(timedelta(minutes=2))
        reopened = await a.occurred()  # damped: silent
        assert reopened.status is IssueStatus.OPEN
        a.at(timedelta(minutes=3))
        await a.cleared()  # the channels never heard it reopen: silent
        a.at(timedelta(minutes=4))
        await a.occurred()  # damped again
        assert types_of(a.receiver.received(url)) == ["issue.opened", "issue.resolved"]
        a.at(timedelta(minutes=11, seconds=1))
        await a.occurred()  # still open past the window: the held-back reopen goes out
        a.at(timedelta(minutes=12))
        await a.occurred()
        assert types_of(a.receiver.received(url)) == [
            "issue.opened", "issue.resolved", "issue.reopened",
        ]  # fmt: skip


class TestQuiet:
    async def test_an_acknowledged_issue_counts_silently_and_resolves_aloud(
        self, alerting: Alerting
    ) -> None:
        a = alerting
        url = a.receiver.url()
        await a.channel(AlertChannelType.WEBHOOK, url=url, secret=new_secret())
        issue = await a.occurred()
        acknowledged = await a.tracker.acknowledge(a.username, issue.id)
        assert acknowledged.status is IssueStatus.ACKNOWLEDGED
        for _ in range(5):
            await a.occurred()
        assert types_of(a.receiver.received(url)) == ["issue.opened"]
        await a.cleared()
        assert types_of(a.receiver.received(url)) == ["issue.opened", "issue.resolved"]

    async def test_an_ignored_issue_never_notifies_nor_reopens(self, alerting: Alerting) -> None:
        a = alerting
        url = a.receiver.url()
        await a.channel(AlertChannelType.WEBHOOK, url=url, secret=new_secret())
        issue = await a.occurred()
        await a.tracker.ignore(a.username, issue.id)
        for minute in range(1, 40, 5):
            a.at(timedelta(minutes=minute))
            await a.occurred()
            await a.cleared()
        stored = await a.issues.require(a.username, issue.id)
        assert (stored.status, stored.count) == (IssueStatus.IGNORED, 9)
        assert types_of(a.receiver.received(url)) == ["issue.opened"]


class TestFailingChannel:
    async def test_marked_retried_with_back_off_then_cleared(self, alerting: Alerting) -> None:
        a = alerting
        failing = a.receiver.url(Reply(500), Reply(503))
        healthy = a.receiver.url()
        channel = await a.channel(AlertChannelType.WEBHOOK, url=failing, secret=new_secret())
        await a.channel(AlertChannelType.SLACK, url=healthy)
        marks: list[tuple[str | None, datetime | None]] = []

        async def look() -> None:
            seen = await a.channels.require(a.username, channel.id)
            marks.append((seen.last_error, seen.failing_since))

        a.on_sleep.append(look)
        await a.occurred()
        assert a.slept == [10, 60]
        assert marks == [("answered 500", T0), ("answered 503", T0)]
        tries = a.receiver.received(failing)
        assert len(tries) == 3
        assert len({t.header("webhook-id") for t in tries}) == 1  # one notification, retried
        after = await a.channels.require(a.username, channel.id)
        assert (after.last_error, after.failing_since, after.last_sent_at) == (None, None, T0)
        assert len(a.receiver.received(healthy)) == 1
        assert [i.type for i in await a.issues.list_for_owner(a.username)] == [IssueType.DELIVERY]

    async def test_given_up_after_the_last_try_and_left_marked(self, alerting: Alerting) -> None:
        a = alerting
        failing = a.receiver.url(then=Reply(500))
        channel = await a.channel(AlertChannelType.SLACK, url=failing)
        await a.occurred()
        assert len(a.receiver.received(failing)) == 3
        marked = await a.channels.require(a.username, channel.id)
        assert (marked.last_error, marked.failing_since) == ("answered 500", T0)
        assert len(await a.issues.list_for_owner(a.username)) == 1  # none about the channel

    async def test_a_hanging_channel_delays_nothing_else(self, alerting: Alerting) -> None:
        a = alerting
        gate = asyncio.Event()
        hanging = a.receiver.url(Reply(gate=gate))
        healthy = a.receiver.url()
        await a.channel(AlertChannelType.SLACK, url=hanging)
        await a.channel(AlertChannelType.SLACK, url=healthy)
        async with asyncio.timeout(5):
            await a.tracker.occurred(a.username, IssueType.DELIVERY, destination="billing")
            await a.receiver.wait_for(healthy, 1, timeout=5)
        assert a.receiver.received(hanging)  # arrived, still unanswered
        gate.set()
        await a.notifier.idle()
        assert a.slept == []

    async def test_the_test_send_reports_and_marks(self, alerting: Alerting) -> None:
        a = alerting
        issue = await a.occurred()  # before the channel: nothing else is sent to it
        url = a.receiver.url(Reply(404))
        channel = await a.channel(AlertChannelType.PAGERDUTY, routing_key="k", events_url=url)
        error = await a.notifier.test(channel, Notification(Notified.OPENED, issue, test=True))
        assert error == "answered 404"
        marked = await a.channels.require(a.username, channel.id)
        assert marked.last_error == "answered 404"

"""The issue lifecycle, and when the owner's channels hear of it.

One issue per owner and *key* (``<type>:<destination or transformation>``). An occurrence
(the breaker opened, a delivery failed for good, the destination was disabled, ...) opens the
issue, or counts on it (``count``, ``last_seen_at``, ``sample_event_id``), or reopens it when it
was resolved. ``clear`` (the destination recovered) resolves it automatically. Owners
``acknowledge``, ``resolve`` or ``ignore`` it.

Notifications, one per transition and never one per occurrence:

- **opened**: the issue is created.
- **reopened**: a resolved issue recurs. *Damping*: when the channels were told *resolved*
  less than ``damping_s`` (10 min) ago, the reopen is silent; the first occurrence once that
  time has passed, with the issue still open, sends the *reopened* it held back. A flapping
  destination so costs at most one opened/resolved pair per ``damping_s``, and a problem that
  stays is never left untold.
- **resolved**: when the channels were last told opened or reopened (an issue resolved after a
  damped, untold reopen stays silent: for the channels it was never open again).
- Acknowledged and ignored issues stay quiet: occurrences count silently; an acknowledged
  issue resolves (automatically or by hand) with a *resolved*; an ignored issue is left alone
  by ``clear`` and never reopens until its owner resolves it.

Each change is a compare-and-set on the issue's status and count
(``IssueRepository.change``): of two writers racing on one transition, one wins and only it
notifies.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final

from hookbay_common.alerts.messages import Notification
from hookbay_common.alerts.notifier import Notifier
from hookbay_common.clock import utcnow
from hookbay_common.db.issues import IssueRepository
from hookbay_common.errors import IssueStateConflict
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Issue, IssueStatus, IssueType, Notified

DEFAULT_DAMPING_S: Final = 600
_RACES: Final = 8
"""Tries of one change against other writers before giving up (each loser reads again)."""


def issue_key(type_: IssueType, subject: str) -> str:
    return f"{type_.value}:{subject}"


class IssueTracker:
    def __init__(
        self,
        issues: IssueRepository,
        notifier: Notifier | None,
        *,
        damping_s: float = DEFAULT_DAMPING_S,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._issues = issues
        self._notifier = notifier
        self._damping = timedelta(seconds=damping_s)
        self._now = now

    # ------------------------------------------------------------------ what happens

    async def occurred(
        self,
        username: str,
        type_: IssueType,
        *,
        destination: str | None = None,
        transformation: str | None = None,
        event_id: str | None = None,
        reason: str | None = None,
    ) -> Issue:
        """One occurrence of the problem: opens, counts on or reopens its issue."""
        subject = destination or transformation or ""
        key = issue_key(type_, subject)
        for _ in range(_RACES):
            now = self._now()
            current = await self._issues.by_key(username, key)
            if current is None:
                created = Issue(
                    id=new_id(IdPrefix.ISSUE), username=username, type=type_, key=key,
                    destination=destination, transformation=transformation, reason=reason,
                    first_seen_at=now, last_seen_at=now, sample_event_id=event_id,
                    opened_at=now, notified=Notified.OPENED, notified_at=now,
                )  # fmt: skip
                if await self._issues.insert(created) is not None:
                    self._tell(created, Notified.OPENED)
                    return created
                continue
            fields: dict[str, Any] = {"last_seen_at": now}
            if event_id is not None:
                fields["sample_event_id"] = event_id
            if reason is not None:
                fields["reason"] = reason
            tell: Notified | None = None
            if current.status is IssueStatus.RESOLVED:
                fields.update(status=IssueStatus.OPEN, opened_at=now, resolved_at=None)
                tell = None if self._damped(current, now) else Notified.REOPENED
            elif current.status is IssueStatus.OPEN and current.notified is Notified.RESOLVED:
                tell = None if self._damped(current, now) else Notified.REOPENED
            if tell is not None:
                fields.update(notified=tell, notified_at=now)
            changed = await self._issues.change(current, fields, occurrences=1)
            if changed is not None:
                if tell is not None:
                    self._tell(changed, tell)
                return changed
        raise RuntimeError(f"issue {key!r} of {username!r} kept changing under this writer")

    async def clear(
        self,
        username: str,
        type_: IssueType,
        *,
        destination: str | None = None,
        transformation: str | None = None,
    ) -> Issue | None:
        """The problem is over (the destination recovered): resolve its issue, unless there is
        none, it is resolved already, or its owner ignores it."""
        key = issue_key(type_, destination or transformation or "")
        issue = await self._issues.by_key(username, key)
        if issue is None or issue.status in (IssueStatus.RESOLVED, IssueStatus.IGNORED):
            return issue
        return await self._resolve(issue)

    # ------------------------------------------------------------------ the owner's actions

    async def acknowledge(self, username: str, issue_id: str) -> Issue:
        """open → acknowledged (again: no change); a resolved or ignored issue is a 409."""
        for _ in range(_RACES):
            issue = await self._issues.require(username, issue_id)
            if issue.status is IssueStatus.ACKNOWLEDGED:
                return issue
            if issue.status is not IssueStatus.OPEN:
                raise IssueStateConflict(issue_id, issue.status.value, "acknowledged")
            changed = await self._issues.change(issue, {"status": IssueStatus.ACKNOWLEDGED})
            if changed is not None:
                return changed
        raise RuntimeError(f"issue {issue_id!r} kept changing under this writer")

    async def resolve(self, username: str, issue_id: str) -> Issue:
        """Any status → resolved (again: no change)."""
        issue = await self._issues.require(username, issue_id)
        if issue.status is IssueStatus.RESOLVED:
            return issue
        return await self._resolve(issue)

    async def ignore(self, username: str, issue_id: str) -> Issue:
        """Any status → ignored: no notification, no reopening, until resolved by hand."""
        for _ in range(_RACES):
            issue = await self._issues.require(username, issue_id)
            if issue.status is IssueStatus.IGNORED:
                return issue
            changed = await self._issues.change(issue, {"status": IssueStatus.IGNORED})
            if changed is not None:
                return changed
        raise RuntimeError(f"issue {issue_id!r} kept changing under this writer")

    # ------------------------------------------------------------------ inside

    async def _resolve(self, issue: Issue) -> Issue:
        for _ in range(_RACES):
            now = self._now()
            tell = Notified.RESOLVED if issue.notified is not Notified.RESOLVED else None
            fields: dict[str, Any] = {"status": IssueStatus.RESOLVED, "resolved_at": now}
            if tell is not None:
                fields.update(notified=tell, notified_at=now)
            changed = await self._issues.change(issue, fields)
            if changed is not None:
                if tell is not None:
                    self._tell(changed, tell)
                return changed
            issue = await self._issues.require(issue.username, issue.id)
            if issue.status is IssueStatus.RESOLVED:
                return issue
        raise RuntimeError(f"issue {issue.id!r} kept changing under this writer")

    def _damped(self, issue: Issue, now: datetime) -> bool:
        """The channels heard *resolved* too recently to hear *reopened* now."""
        return (
            issue.notified is Notified.RESOLVED
            and issue.notified_at is not None
            and now - issue.notified_at < self._damping
        )

    def _tell(self, issue: Issue, kind: Notified) -> None:
        if self._notifier is not None:
            self._notifier.notify(issue.username, Notification(kind, issue))

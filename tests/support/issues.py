"""In-memory fakes for issue tests without a store: ``IssueRepository``'s contract (the unique
(owner, key) and the compare-and-set of ``change``) and a notifier that records what it was
asked to tell."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from hookbay_common.alerts import Notification
from hookbay_common.errors import IssueNotFound
from hookbay_common.models import Issue, Notified


@dataclass
class MemoryIssues:
    by_id: dict[str, Issue] = field(default_factory=dict)

    async def insert(self, issue: Issue) -> Issue | None:
        await asyncio.sleep(0)
        if await self.by_key(issue.username, issue.key) is not None:
            return None
        self.by_id[issue.id] = issue
        return issue

    async def by_key(self, username: str, key: str) -> Issue | None:
        return next(
            (i for i in self.by_id.values() if (i.username, i.key) == (username, key)), None
        )

    async def require(self, username: str, issue_id: str) -> Issue:
        issue = self.by_id.get(issue_id)
        if issue is None or issue.username != username:
            raise IssueNotFound(issue_id)
        return issue

    async def change(
        self, issue: Issue, fields: dict[str, Any], *, occurrences: int = 0
    ) -> Issue | None:
        await asyncio.sleep(0)
        current = self.by_id.get(issue.id)
        if current is None or (current.status, current.count) != (issue.status, issue.count):
            return None
        changed = current.model_copy(update={**fields, "count": current.count + occurrences})
        self.by_id[issue.id] = changed
        return changed


@dataclass
class Told:
    """``Notifier.notify``: every notification, in order."""

    notifications: list[tuple[str, Notification]] = field(default_factory=list)

    def notify(self, username: str, notification: Notification) -> None:
        self.notifications.append((username, notification))

    def kinds(self) -> list[tuple[str, Notified]]:
        return [(n.issue.type.value, n.kind) for _, n in self.notifications]

"""An owner's issues: listed, and moved by their owner (acknowledge, resolve, ignore)."""

from __future__ import annotations

from hookbay_common.alerts import IssueTracker
from hookbay_common.db import IssueRepository
from hookbay_common.models import Issue, IssueStatus


class IssueService:
    def __init__(self, issues: IssueRepository, tracker: IssueTracker) -> None:
        self._issues = issues
        self._tracker = tracker

    async def list_for_owner(self, username: str, status: IssueStatus | None) -> list[Issue]:
        return await self._issues.list_for_owner(username, status)

    async def get(self, username: str, issue_id: str) -> Issue:
        return await self._issues.require(username, issue_id)

    async def acknowledge(self, username: str, issue_id: str) -> Issue:
        return await self._tracker.acknowledge(username, issue_id)

    async def resolve(self, username: str, issue_id: str) -> Issue:
        """Resolved; the channels hear it when they heard it was open."""
        return await self._tracker.resolve(username, issue_id)

    async def ignore(self, username: str, issue_id: str) -> Issue:
        return await self._tracker.ignore(username, issue_id)

"""What a notification says: the issue as the API shows it, and each channel's text."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import Issue, Notified


def issue_view(issue: Issue) -> dict[str, Any]:
    """The issue's public fields (``GET /issues``), JSON-ready."""
    view = issue.model_dump(mode="json", exclude={"username", "key", "notified", "notified_at"})
    return view


@dataclass(frozen=True)
class Notification:
    """One transition of one issue, told to every channel of its owner. ``id`` is the same on
    every channel and every retry (the ``webhook-id`` a receiver deduplicates on)."""

    kind: Notified
    issue: Issue
    test: bool = False
    id: str = field(default_factory=lambda: new_id(IdPrefix.NOTIFICATION))

    @property
    def type(self) -> str:
        return f"issue.{self.kind.value}"

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, "issue": issue_view(self.issue)}
        if self.test:
            body["test"] = True
        return body

    def summary(self) -> str:
        i = self.issue
        subject = i.destination or i.transformation or "-"
        what = {
            Notified.OPENED: "opened", Notified.REOPENED: "reopened",
            Notified.RESOLVED: "resolved",
        }[self.kind]  # fmt: skip
        reason = f" ({i.reason})" if i.reason else ""
        prefix = "Test: " if self.test else ""
        return f"{prefix}hookbay: {i.type.value} issue {what} for {subject}{reason}"

    def text(self) -> str:
        i = self.issue
        lines = [
            self.summary(),
            "",
            f"issue: {i.id}",
            f"status: {i.status.value}",
            f"first seen: {_when(i.first_seen_at)}",
            f"last seen: {_when(i.last_seen_at)}",
            f"occurrences: {i.count}",
        ]
        if i.sample_event_id:
            lines.append(f"sample event: {i.sample_event_id}")
        return "\n".join(lines) + "\n"


def _when(at: datetime | None) -> str:
    return at.isoformat() if at else "-"

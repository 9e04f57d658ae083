"""UTC timestamps at millisecond precision, the precision MongoDB stores."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def isoformat(moment: datetime) -> str:
    """``2026-11-21T10:04:05.123Z``: ISO 8601, UTC, milliseconds, ``Z`` suffix."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

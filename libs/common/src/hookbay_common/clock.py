"""UTC timestamps at millisecond precision, the precision MongoDB stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def utcnow() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the Unix epoch (BSON's own precision), exactly: no float."""
    return (moment - EPOCH) // _MS


def from_epoch_ms(millis: int) -> datetime:
    """The UTC moment ``millis`` milliseconds after the Unix epoch (``epoch_ms``'s inverse)."""
    return EPOCH + millis * _MS


def isoformat(moment: datetime) -> str:
    """``2026-11-21T10:04:05.123Z``: ISO 8601, UTC, milliseconds, ``Z`` suffix."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

"""``GET /webhooks/{name}/stats``: the caller's webhook's delivery stats. Another owner's webhook
answers 404 exactly like a missing one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AwareDatetime

from hookbay_dashboard.deps import CurrentUser, StatsDep
from hookbay_dashboard.stats.schemas import BucketSize, StatsWindow, WebhookStats

router = APIRouter(tags=["stats"])


@router.get("/webhooks/{name}/stats", response_model=WebhookStats)
async def webhook_stats(
    name: str,
    principal: CurrentUser,
    stats: StatsDep,
    window: Annotated[
        StatsWindow | None,
        Query(
            description="A window ending now (or at `until`): `1h` in 1-minute buckets, `24h` "
            "and `7d` in 1-hour buckets. The default (`24h`) when `since` is not given; not "
            "with `since`."
        ),
    ] = None,
    since: Annotated[
        AwareDatetime | None,
        Query(description="Start of a date range (ISO 8601 with an offset), instead of window."),
    ] = None,
    until: Annotated[
        AwareDatetime | None,
        Query(description="End of the window or range (ISO 8601 with an offset); now by default."),
    ] = None,
    bucket: Annotated[
        BucketSize | None,
        Query(
            description="Bucket size. Default: the window's, or for a range the smallest that "
            "gives at most 1,500 buckets. Minute-sized buckets (1m to 30m) cover at most 48 "
            "hours."
        ),
    ] = None,
) -> WebhookStats:
    """What arrived and what delivery did, in totals and per bucket (every bucket of the span,
    zeros included), from the stream-computed stats: received, rejected, delivered, failed,
    retried, replays, attempts, success rate, destination latency (mean, p50/p95/p99 from a
    histogram) and answer classes. Buckets start at whole multiples of their size in UTC; the
    span is widened to whole buckets. 422 for a window with `since`, `until` not after `since`,
    more than 1,500 buckets, or minute-sized buckets over more than 48 hours."""
    return await stats.for_webhook(
        principal.username, name, window=window, since=since, until=until, bucket=bucket
    )

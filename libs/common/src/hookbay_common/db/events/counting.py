"""Counting events by status, over a webhook or an owner's page summaries, within dates."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from hookbay_common.db.documents import gather_limited
from hookbay_common.db.events.books import PageBooks
from hookbay_common.db.events.layout import _STATUSES, page_id
from hookbay_common.db.events.summaries import PageSummary, _decode_minutes, _on_minute, minute_key
from hookbay_common.models import EventStatus


class EventCounts(PageBooks):
    """Events by status: from the page summaries, reading heads only where a bound cuts a page."""

    async def counts(
        self,
        webhook_id: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[EventStatus, int]:
        """The webhook's events by status (``created_at`` in [since, until)): from the page
        summaries, counting the heads only of pages that straddle a bound."""
        return await self.counts_from(await self.summaries(webhook_id=webhook_id), since, until)

    async def counts_from(
        self,
        summaries: Iterable[PageSummary],
        since: datetime | None = None,
        until: datetime | None = None,
        only: EventStatus | None = None,
    ) -> dict[EventStatus, int]:
        """Events by status in [since, until) on the pages of ``summaries``: a page inside the
        bounds from its summary, one a bound cuts from its heads (read in parallel). With
        ``only``, that status is the one asked for: a cut page whose summary counts none of it
        is not read (the overview's pending: the page 24 h back has rarely any)."""
        counts = dict.fromkeys(_STATUSES, 0)
        cut = []
        for summary in summaries:
            if (since is not None and summary.last_at < since) or (
                until is not None and summary.first_at >= until
            ):
                continue
            if only is not None and summary.counts[only] == 0:
                continue
            inside = (since is None or summary.first_at >= since) and (
                until is None or summary.last_at < until
            )
            if inside:
                for status, n in summary.counts.items():
                    counts[status] += n
            else:
                cut.append(summary)
        pages = await gather_limited(self._page_counts(c, since, until) for c in cut)
        for page_counts in pages:
            for status, n in page_counts.items():
                counts[status] += n
        return counts

    async def _page_counts(
        self, summary: PageSummary, since: datetime | None, until: datetime | None
    ) -> dict[EventStatus, int]:
        """Events by status in [since, until) on one page a bound cuts: from the per-minute
        counts of its summary when the bounds fall on whole minutes, else from its heads."""
        counts = dict.fromkeys(_STATUSES, 0)
        if _on_minute(since) and _on_minute(until):
            doc = await self._pages.find_one({"_id": page_id(summary.webhook_id, summary.page)})
            if doc is not None and "minutes" in doc:
                low = minute_key(since) if since is not None else ""
                high = minute_key(until) if until is not None else None
                for key, tally in _decode_minutes(doc["minutes"]):
                    if key >= low and (high is None or key < high):
                        for status, n in zip(_STATUSES, tally, strict=True):
                            counts[status] += n
                return counts
        for created_at, status in await self._page_statuses(summary.webhook_id, summary.page):
            if (since is None or created_at >= since) and (until is None or created_at < until):
                counts[status] += 1
        return counts

    async def _page_statuses(
        self, webhook_id: str, page: int
    ) -> list[tuple[datetime, EventStatus]]:
        """(created_at, status) of each event of a page: what counting needs, nothing more."""
        query = {"webhook_id": webhook_id, "page": page}
        return [
            (doc["created_at"], EventStatus(doc["status"]))
            async for doc in self._events.find(query, {"created_at": 1, "status": 1})
        ]

    async def count_replayable(self, webhook_id: str, before: datetime) -> int:
        """Failed events of the webhook created before ``before`` that were forwarded (not
        rejected by their signature): what a bulk replay started then would publish."""
        total = 0
        for summary in await self.summaries(webhook_id=webhook_id):
            if summary.first_at >= before:
                continue
            if summary.last_at < before:
                total += summary.counts[EventStatus.FAILED] - summary.rejected
                continue
            for row in await self.page_heads(summary.webhook_id, summary.page, EventStatus.FAILED):
                total += row.rejected_reason is None and row.created_at < before
        return total

    async def count_for_webhook(self, webhook_id: str, status: EventStatus | None = None) -> int:
        counts = await self.counts(webhook_id)
        return sum(counts.values()) if status is None else counts[status]

"""The delivery stats in the dashboard: the overview's hourly sparkline and the event list's stats
panel, with stats seeded through ``StatsRepository.write`` as the stats processor writes them."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from playwright.async_api import expect

from hookbay_common.clock import utcnow
from hookbay_common.db import Database, StatsRepository
from hookbay_common.db.stats import HOUR, MINUTE, Bucket, Counts
from tests.browser.conftest import Session, Stack


def counts(latencies: tuple[float, ...] = (), **values: int) -> Counts:
    made = Counts(**values)  # type: ignore[arg-type]
    for latency in latencies:
        made.observe_latency(latency)
        made.observe_code(200)
    return made


async def seed_stats(db: Database, hook: dict[str, Any], minutes: dict[datetime, Counts]) -> None:
    """Minute buckets and their hours' sums for the webhook, as the processor writes them."""
    hours: dict[int, Counts] = defaultdict(Counts)
    buckets = []
    for at, made in minutes.items():
        start = int(at.timestamp()) // MINUTE * MINUTE
        buckets.append(Bucket(hook["id"], hook["username"], "minute", start, made))
        hours[start // HOUR * HOUR].add(made)
    buckets += [Bucket(hook["id"], hook["username"], "hour", h, c) for h, c in hours.items()]
    await StatsRepository(db).write(buckets)


def recent_traffic() -> dict[datetime, Counts]:
    """4 received two minutes ago (3 delivered, 1 failed), 10 received and delivered 3 hours
    ago: 14 / 13 / 1 over a day or a week, 4 / 3 / 1 over the last hour."""
    now = utcnow()
    return {
        now - timedelta(minutes=2): counts(
            received=4, delivered=3, failed=1, attempts=4, latencies=(40, 45, 80, 300)
        ),
        now - timedelta(hours=3): counts(
            received=10, delivered=10, attempts=10, latencies=(30,) * 10
        ),
    }


class TestStats:
    async def test_overview_sparkline_and_the_panel_switching_windows(
        self, stack: Stack, session: Session
    ) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        quiet = await stack.webhook(owner)
        await seed_stats(stack.db, hook, recent_traffic())
        page = session.page
        await session.login(owner)

        card = page.get_by_role("listitem").filter(
            has=page.get_by_role("link", name=hook["name"], exact=True)
        )
        await expect(
            card.get_by_role("link", name=re.compile("^14 events received"))
        ).to_be_visible()
        await expect(
            card.get_by_role("link", name=re.compile("^13 deliveries succeeded"))
        ).to_be_visible()
        await expect(
            card.get_by_role("link", name=re.compile("^1 deliveries failed"))
        ).to_be_visible()
        await expect(card).to_contain_text("Success rate 92.9 %")
        sparkline = card.get_by_role("img", name=re.compile("last 24 hours, per hour"))
        label = await sparkline.get_attribute("aria-label")
        assert label is not None
        delivered, failed = re.findall(r"(?:delivered|failed) ([\d, ]+)", label)
        assert len(delivered.split(", ")) == len(failed.split(", ")) == 24
        assert sorted(int(n) for n in delivered.split(", "))[-2:] == [3, 10]
        assert sum(int(n) for n in failed.split(", ")) == 1
        quiet_card = page.get_by_role("listitem").filter(
            has=page.get_by_role("link", name=quiet["name"], exact=True)
        )
        await expect(
            quiet_card.get_by_role("img", name=re.compile("nothing delivered or failed"))
        ).to_be_visible()

        await page.get_by_role("link", name=hook["name"], exact=True).click()
        panel = page.get_by_test_id("stats-panel")
        await expect(panel.get_by_role("heading", name="Delivery stats")).to_be_visible()
        figures = panel.get_by_role("definition")
        await expect(figures).to_have_text(["14", "13", "1", "0", "92.9 %", "≤ 50 ms", "≤ 500 ms"])
        windows = panel.get_by_role("navigation", name="Stats window")
        await expect(windows.get_by_role("link", name="Last 24 hours")).to_have_attribute(
            "aria-current", "page"
        )

        await windows.get_by_role("link", name="Last hour").click()
        await expect(page).to_have_url(re.compile(r"window=1h"))
        await expect(windows.locator("[aria-current]")).to_have_text(["Last hour"])
        await expect(figures).to_have_text(["4", "3", "1", "0", "75.0 %", "≤ 50 ms", "≤ 500 ms"])
        await expect(
            panel.get_by_role("img", name=re.compile("last hour, per minute"))
        ).to_be_visible()

        await windows.get_by_role("link", name="Last 7 days").click()
        await expect(page).to_have_url(re.compile(r"window=7d"))
        await expect(figures.first).to_have_text("14")
        await page.reload()
        await expect(
            panel.get_by_role("img", name=re.compile("last 7 days, per hour"))
        ).to_be_visible()
        await expect(windows.get_by_role("link", name="Last 7 days")).to_have_attribute(
            "aria-current", "page"
        )

    async def test_a_webhook_without_traffic_says_so(self, stack: Stack, session: Session) -> None:
        owner = await stack.owner()
        hook = await stack.webhook(owner)
        await session.login(owner, f"/webhooks/{hook['name']}/events?window=1h")
        panel = session.page.get_by_test_id("stats-panel")
        await expect(panel).to_contain_text("No traffic in this window (last hour).")

"""The run's metrics, handed over at the end: a textfile for node_exporter and a push to a
(local stand-in) Pushgateway."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hookbay_common.clock import utcnow
from hookbay_common.db import StatsRepository
from hookbay_common.db.client import Database
from hookbay_common.db.stats import HOUR, Bucket, Counts
from hookbay_common.plans import load_plans
from hookbay_retention.metrics import JOB, export, registry_for
from hookbay_retention.service import RetentionReport, build_job
from hookbay_retention.settings import RetentionSettings
from tests.support.factories import TEST_SECRET_KEY, unique_name
from tests.support.net import free_port
from tests.support.retention import Pushgateway, create_owner, days_ago


def samples(text: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture
async def report(rdb: Database, retention_url: str) -> RetentionReport:
    now = utcnow()
    old = await create_owner(rdb, "free", [days_ago(now, 40), days_ago(now, 50)], attempts_each=2)
    hour = int(days_ago(now, 45).timestamp()) // HOUR * HOUR
    await StatsRepository(rdb).write(
        [Bucket(unique_name("wh_"), old.username, "hour", hour, Counts())]
    )
    await create_owner(rdb, "free", [days_ago(now, 10)])
    settings = RetentionSettings(secret_key=TEST_SECRET_KEY, mongo_url=retention_url)  # type: ignore[arg-type]
    return await build_job(rdb, load_plans(None), settings).run()


class TestMetrics:
    def test_textfile(self, report: RetentionReport, tmp_path: Path) -> None:
        path = tmp_path / "hookbay_retention.prom"
        export(registry_for(report), textfile=path, pushgateway=None)
        values = samples(path.read_text())
        assert values["hookbay_retention_deleted_events_total"] == 2
        assert values["hookbay_retention_deleted_attempts_total"] == 4
        assert values["hookbay_retention_deleted_daily_stats_total"] == 1
        assert values["hookbay_retention_duration_seconds"] == pytest.approx(report.duration)
        assert report.finished_at is not None
        assert values["hookbay_retention_last_success_timestamp_seconds"] == pytest.approx(
            report.finished_at.timestamp()
        )
        assert [p.name for p in tmp_path.iterdir()] == [path.name]  # renamed into place
        # the run's own figures only: no frozen process_* of an exited process beside
        # node_exporter's, no hookbay_asyncio_tasks
        assert all(key.startswith("hookbay_retention_") for key in values), sorted(values)

    def test_push(self, report: RetentionReport, pushgateway: Pushgateway) -> None:
        export(registry_for(report), textfile=None, pushgateway=pushgateway.url)
        [pushed] = pushgateway.received
        assert (pushed.method, pushed.path) == ("PUT", f"/metrics/job/{JOB}")
        values = samples(pushed.body.decode())
        assert values["hookbay_retention_deleted_events_total"] == 2
        assert values["hookbay_retention_deleted_attempts_total"] == 4
        assert "hookbay_retention_last_success_timestamp_seconds" in values

    def test_unreachable_gateway_raises(self, report: RetentionReport) -> None:
        with pytest.raises(OSError):  # noqa: PT011  (URLError: connection refused)
            export(
                registry_for(report), textfile=None,
                pushgateway=f"http://127.0.0.1:{free_port()}",
            )  # fmt: skip

"""The soak's judgement, on made-up samples: flat passes; growth of memory, descriptors or tasks,
a lag above its bound, or a task gauge that stopped being reported fail."""

from __future__ import annotations

from typing import Any

from tests.chaos.soak import GROWTH_ALLOWED, LAG_BOUND, RSS_GROWTH, judge

WARM_UP = 60.0
MIB = 2**20


def samples(**late: Any) -> list[dict[str, Any]]:
    """One process ``p`` sampled every 10 s for 5 minutes, flat, then ``late`` fields in the last
    minute (the first minute is warm-up)."""
    rows = []
    for t in range(0, 300, 10):
        row = {"t": float(t), "process": "p", "rss": 100 * MIB, "fds": 20, "tasks": 10, "lag": 0.0}
        if t >= 240:
            row.update(late)
        rows.append(row)
    return rows


def verdict(**late: Any) -> dict[str, Any]:
    verdicts = judge(samples(**late), WARM_UP)
    return verdicts["p"]  # type: ignore[no-any-return]


def test_flat_passes() -> None:
    v = verdict()
    assert (v["rss_ok"], v["fds_ok"], v["tasks_ok"], v["lag_ok"]) == (True, True, True, True)
    assert v["tasks"] == [10, 10]


def test_memory_growth_fails() -> None:
    assert verdict(rss=int(100 * MIB * (1 + RSS_GROWTH)) + MIB)["rss_ok"] is False


def test_descriptors_may_step_but_not_grow() -> None:
    assert verdict(fds=20 + GROWTH_ALLOWED)["fds_ok"] is True  # a pool's step
    assert verdict(fds=20 + GROWTH_ALLOWED + 1)["fds_ok"] is False


def test_task_growth_fails() -> None:
    assert verdict(tasks=10 + GROWTH_ALLOWED + 1)["tasks_ok"] is False


def test_an_unreported_task_gauge_fails() -> None:
    v = verdict(tasks=None)
    assert v["tasks_ok"] is False
    assert v["tasks"] is None


def test_lag_above_its_bound_fails() -> None:
    assert verdict(lag=float(LAG_BOUND + 1))["lag_ok"] is False

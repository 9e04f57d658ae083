"""The soak: the whole stack at a steady rate for a long while (30 minutes in ``make chaos``), the
destination failing one first attempt in ten (``destination.FLAKY``) so retries never stop; every
process's resident memory, open file descriptors and asyncio tasks, and the consumers' lag,
sampled every ``INTERVAL`` seconds. Then drained and checked like a scenario.

Judged after the warm-up (``warm_up_seconds``: until the bounded caches are full):
each process's RSS must stay within 10 % of what it was when the warm-up ended (the median of
the first post-warm-up minute against the maximum of any later minute's median), its descriptors
and tasks must not grow beyond the high-water steps of its connection pools (last minute's median
≤ ``_bound`` of the first post-warm-up minute's maximum), and the lag must stay bounded (below
``LAG_BOUND`` records at every sample after warm-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from hookbay_common.db.events import LOCATE_CACHE
from tests.chaos.checker import check
from tests.chaos.stack import Infra, Stack
from tests.support.processes import ServiceProcess

INTERVAL = 10.0
RSS_GROWTH = 0.10
GROWTH_ALLOWED = 8
"""Descriptors or tasks a process may end with above its post-warm-up start (``_bound``)."""
LAG_BOUND = 5_000
"""Records a consumer may be behind at any sample: at 100/s, under a minute of work."""


def _rss_and_fds(pid: int) -> tuple[int, int]:
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


async def _scrape(client: httpx.AsyncClient, process: ServiceProcess) -> tuple[int | None, float]:
    """(asyncio tasks, consumer lag summed over partitions) from the process's ``/metrics``;
    tasks ``None`` when the scrape failed or lacked the gauge (``judge`` fails the process)."""
    tasks: int | None = None
    lag = 0.0
    with contextlib.suppress(httpx.HTTPError):
        text = (await client.get(process.base + "/metrics", follow_redirects=True)).text
        for family in text_string_to_metric_families(text):
            if family.name == "hookbay_asyncio_tasks":
                tasks = int(family.samples[0].value)
            elif family.name == "hookbay_consumer_lag":
                lag += sum(s.value for s in family.samples)
    return tasks, lag


async def sample(stack: Stack, client: httpx.AsyncClient, started: float) -> list[dict[str, Any]]:
    rows = []
    for key, process in sorted(stack.processes.items()):
        if process.exited:
            continue
        rss, fds = _rss_and_fds(process.proc.pid)
        tasks, lag = await _scrape(client, process)
        rows.append({
            "t": round(time.time() - started, 1), "process": key, "rss": rss, "fds": fds,
            "tasks": tasks, "lag": lag,
        })  # fmt: skip
    return rows


def warm_up_seconds(rate: float, minutes: float) -> float:
    """Until the processes' bounded structures are full, at least 5 minutes (at most half a short
    run): flatness before that means nothing. The largest is the recorder's event-location cache
    (``LOCATE_CACHE`` events, ~12 MiB full), which fills in ``LOCATE_CACHE / rate`` seconds:
    8 min 20 s at 100 requests/s."""
    return min(max(300.0, LOCATE_CACHE / rate), minutes * 60 / 2)


def _bound(start: float) -> float:
    """How far descriptors or tasks may end above their post-warm-up start: a connection pool
    (pymongo's, aiohttp's, aiokafka's) opens a connection more at a burst and keeps it — the
    first 30-minute soaks saw steps of +3 to +6 — while a leak tied to requests or retries grows
    by hundreds in 15 minutes at 100/s (one descriptor per 1,000 requests is 90)."""
    return max(start + GROWTH_ALLOWED, start * 1.25)


def judge(samples: list[dict[str, Any]], warm_up: float) -> dict[str, Any]:
    """Per process: RSS growth, descriptor and task growth, maximum lag, each with its verdict."""
    verdicts: dict[str, Any] = {}
    for key in sorted({s["process"] for s in samples}):
        mine = [s for s in samples if s["process"] == key and s["t"] >= warm_up]
        minutes: dict[int, list[dict[str, Any]]] = {}
        for s in mine:
            minutes.setdefault(int((s["t"] - warm_up) // 60), []).append(s)
        if len(minutes) < 2:
            continue
        ordered = [minutes[m] for m in sorted(minutes)]
        first, last = ordered[0], ordered[-1]

        def median(rows: list[dict[str, Any]], field: str) -> float:
            return float(statistics.median(r[field] for r in rows))

        rss_start = median(first, "rss")
        rss_peak = max(median(rows, "rss") for rows in ordered)
        growth = (rss_peak - rss_start) / rss_start
        fds_ok = median(last, "fds") <= _bound(max(r["fds"] for r in first))
        reported = all(s["tasks"] is not None for s in mine)  # a gauge gone is no "no growth"
        tasks_ok = reported and median(last, "tasks") <= _bound(max(r["tasks"] for r in first))
        lag = max(s["lag"] for s in mine)
        verdicts[key] = {
            "rss_mib_start": round(rss_start / 2**20, 1), "rss_mib_peak": round(rss_peak / 2**20, 1),
            "rss_growth": round(growth, 3), "rss_ok": growth <= RSS_GROWTH,
            "fds": [median(first, "fds"), median(last, "fds")], "fds_ok": fds_ok,
            "tasks": [median(first, "tasks"), median(last, "tasks")] if reported else None,
            "tasks_ok": tasks_ok,
            "lag_max": lag, "lag_ok": lag <= LAG_BOUND,
        }  # fmt: skip
    return verdicts


def plot(samples: list[dict[str, Any]], warm_up: float, out: Path) -> None:
    """The soak's curves (RSS, descriptors, tasks, lag per process) as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fields = [("rss", "RSS MiB", 2**20), ("fds", "open fds", 1), ("tasks", "asyncio tasks", 1),
              ("lag", "consumer lag (records)", 1)]  # fmt: skip
    figure, axes = plt.subplots(len(fields), 1, figsize=(10, 11), sharex=True)
    for axis, (field, label, scale) in zip(axes, fields, strict=True):
        for key in sorted({s["process"] for s in samples}):
            mine = [s for s in samples if s["process"] == key]
            if field == "lag" and not any(s["lag"] for s in mine):
                continue
            values = [math.nan if s[field] is None else s[field] / scale for s in mine]
            axis.plot([s["t"] / 60 for s in mine], values, label=key)
        axis.axvline(warm_up / 60, color="grey", linestyle=":", linewidth=1)
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    axes[0].legend(loc="upper left", ncol=4, fontsize="small")
    axes[-1].set_xlabel("minutes (dotted: end of warm-up)")
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=80)
    plt.close(figure)


async def soak(
    infra: Infra, workdir: Path, rate: float, minutes: float, png: Path
) -> dict[str, Any]:
    warm_up = warm_up_seconds(rate, minutes)
    async with Stack(infra, "soak", workdir / "soak") as stack:
        await stack.destination_mode("flaky")
        samples: list[dict[str, Any]] = []
        started = time.time()
        await stack.start_load(rate)
        async with httpx.AsyncClient(timeout=5) as client:
            due = started
            while time.time() - started < minutes * 60:
                samples += await sample(stack, client, started)
                due += INTERVAL
                await asyncio.sleep(max(0.0, due - time.time()))  # the sampling period
        await stack.stop_load()
        stored = await stack.drained(300)
        in_kafka = await stack.in_kafka()
        counted = await stack.counted_by_stats(len(in_kafka), 60)
        verdict = check(
            stack.answers(), in_kafka, stored, stack.deliveries(), counted_by_stats=counted
        )
        retried = sum(1 for d in stack.deliveries() if d["status"] == 503)
        (workdir / "soak" / "samples.jsonl").write_text(
            "".join(json.dumps(s) + "\n" for s in samples)
        )
        plot(samples, warm_up, png)
        processes = judge(samples, warm_up)
        return {
            "minutes": minutes, "rate": rate, "warm_up_s": warm_up, "samples": len(samples),
            "retried_first_attempts": retried, "processes": processes, "exited": stack.exited(),
            "verdict": verdict.as_dict(),
            "ok": verdict.ok and not stack.exited() and bool(processes) and all(
                p["rss_ok"] and p["fds_ok"] and p["tasks_ok"] and p["lag_ok"]
                for p in processes.values()
            ),
        }  # fmt: skip

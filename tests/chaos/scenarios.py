"""The chaos scenarios: one fault each, injected mid-stream under steady load, then drained and
checked (``checker.check``). Each fault function injects the fault, holds it, ends it and returns
once the faulty part is back (restarted and ready); the runner measures around it."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from hookbay_common.db import Collections
from hookbay_common.db.documents import body_to_document
from hookbay_common.models import RateLimit, RatePeriod
from tests.chaos.checker import Verdict, check
from tests.chaos.destination import SLOW
from tests.chaos.stack import ROUTED_DESTINATION, THROWS, Infra, Stack
from tests.support.waiting import until

DRAIN = 300.0
STATS_WAIT = 60.0
"""Seconds the stats processor may take, once everything is delivered and stored, to have
counted every event on the topic."""


@dataclass(frozen=True)
class Timing:
    """Seconds of load before the fault (``warm``) and after it (``after``), and how long a fault
    lasts (``hold``; the issue: "for 10 s" where it names a time). ``make test`` runs a few
    scenarios with ``SHORT``."""

    warm: float = 10.0
    after: float = 15.0
    hold: float = 10.0


FULL = Timing()
SHORT = Timing(warm=3.0, after=4.0, hold=3.0)


@dataclass(frozen=True)
class Scenario:
    """``fan_out`` routes per routed owner, their destinations created with ``routed_fields``;
    ``verify`` checks the drained run's destination log and writes ``stack.controls``."""

    name: str
    title: str
    fault: Callable[[Stack], Awaitable[None]]
    fan_out: int = 1
    routed_fields: dict[str, Any] = field(default_factory=dict)
    verify: Callable[[Stack, list[str]], None] | None = None
    forward_routes: bool = False
    """The ``forward_url`` owners' webhooks as ``hookbay-admin migrate`` leaves them."""
    rate: float | None = None
    """The scenario's own load (events/s) instead of the suite's ``--rate``."""
    alerts: bool = False
    """Each routed owner has an alert channel (``Stack.alerts``)."""
    spinner: bool = False
    """The first routed owner has a route through a transformation (``Stack.spinner``)."""


async def _hold(stack: Stack, since: float, times: float = 1.0) -> None:
    """Until ``times`` the stack's hold after ``since``: the fault's duration."""
    await asyncio.sleep(max(0.0, since + times * stack.hold - time.monotonic()))


async def no_fault(stack: Stack) -> None:
    del stack


def _killed(*keys: str) -> Callable[[Stack], Awaitable[None]]:
    """kill -9 of the processes ``keys`` at once; each started again half a hold later."""

    async def fault(stack: Stack) -> None:
        began = time.monotonic()
        for key in keys:
            stack.processes[key].kill()
        for key in keys:
            await stack.processes[key].wait()
        await _hold(stack, began, 0.5)
        for key in keys:
            await stack.start(key)

    return fault


def _servers_restarted(*names: str) -> Callable[[Stack], Awaitable[None]]:
    async def fault(stack: Stack) -> None:
        began = time.monotonic()
        await stack.infra.down(*reversed(names))
        await _hold(stack, began)
        await stack.infra.up(*names)

    return fault


async def ingest_replica_terminated(stack: Stack) -> None:
    began = time.monotonic()
    replica = stack.processes["ingest-1"]
    replica.terminate()
    # uvicorn re-raises the signal after its graceful shutdown (hookbay_ingest.__main__)
    assert await replica.wait(60) in (0, -signal.SIGTERM), replica.tail()
    await _hold(stack, began)
    await stack.start("ingest-1")


async def destination_unavailable_then_hanging(stack: Stack) -> None:
    began = time.monotonic()
    await stack.destination_mode("unavailable")
    await _hold(stack, began)
    await stack.destination_mode("hang")
    await _hold(stack, began, 2)
    await stack.destination_mode("ok")


async def store_refuses_writes(stack: Stack) -> None:
    """PostgreSQL under FerretDB turns read-only (every write refused, as on a full disk) for
    twice the hold, then writable again."""
    began = time.monotonic()
    await stack.infra.psql("ALTER SYSTEM SET default_transaction_read_only = on")
    await stack.infra.psql("SELECT pg_reload_conf()")
    try:
        await _hold(stack, began, 2)
    finally:
        await stack.infra.psql("ALTER SYSTEM RESET default_transaction_read_only")
        await stack.infra.psql("SELECT pg_reload_conf()")


PAUSE_APPLIED = 2.0
"""Seconds after a pause before no attempt may reach a paused destination: the change log's
delivery (milliseconds) and an attempt already under way."""


async def routed_destinations_paused(stack: Stack) -> None:
    """Every routed owner's destination paused for twice the hold, then resumed: their events
    are held (no attempt reaches them meanwhile) and delivered after the resume; the other
    owners' deliveries go on. An attempt to a paused destination fails the scenario."""
    began = time.monotonic()
    await stack.pause_routed(True)
    await asyncio.sleep(PAUSE_APPLIED)
    quiet_from = time.time()
    await _hold(stack, began, 2)
    quiet_until = time.time()
    paths = {f"/{username}" for username in stack.routed}
    reached = [
        d for d in stack.deliveries() if d["path"] in paths and quiet_from <= d["at"] <= quiet_until
    ]
    await stack.pause_routed(False)
    assert not reached, f"{len(reached)} attempts reached a paused destination"


RATE: Final = 5
"""Requests a second each routed destination is limited to in ``rate-limited``: below each
owner's share of the load (150/s over 20 owners), so the limit, not the load, sets the pace."""
RATE_WINDOW: Final = 60.0
RATE_TOLERANCE: Final = 0.10


async def routed_rate_limited(stack: Stack) -> None:
    """Every routed destination limited to ``RATE``/s for a minute and more: the attempts
    reaching each over ``RATE_WINDOW`` seconds (from once the change applied) are counted at the
    destination and must be within ``RATE_TOLERANCE`` of the limit; then the limit is lifted
    and the backlog drains."""
    await stack.change_routed({"rate_limit": RateLimit(count=RATE, period=RatePeriod.SECOND)})
    await asyncio.sleep(PAUSE_APPLIED + 1)  # the change log, and the lanes' backlog building
    start = time.time()
    await asyncio.sleep(RATE_WINDOW)
    end = time.time()
    await stack.change_routed({"rate_limit": None})
    counted = dict.fromkeys(stack.routed_paths, 0)
    for d in stack.deliveries():
        if d["path"] in counted and start <= d["at"] < end:
            counted[d["path"]] += 1
    rates = [n / RATE_WINDOW for n in counted.values()]
    ok = all(abs(rate - RATE) <= RATE * RATE_TOLERANCE for rate in rates)
    stack.controls["rate"] = {
        "limit_per_s": RATE, "window_s": RATE_WINDOW, "destinations": len(rates),
        "min_per_s": round(min(rates), 2), "max_per_s": round(max(rates), 2), "ok": ok,
    }  # fmt: skip


SLOW_WINDOW: Final = 60.0
SETTLE: Final = 10.0
"""Seconds into a slow or hanging window before measuring: the backlog and the lanes' retries
settle into the new pace."""
KEEP_UP: Final = 0.05
"""The routed owners' backlog may grow by at most this share of what they sent meanwhile."""


def _owner_of(stack: Stack, answer: dict[str, Any]) -> str:
    return stack.targets[int(answer["target"])].path.split("/")[2]


def _backlog(stack: Stack, owners: set[str], at: float) -> int:
    """Requests of ``owners`` answered 200 by ``at`` and not yet delivered by then."""
    accepted = {
        str(a["request_id"]) for a in stack.accepted()
        if a["answered"] <= at and _owner_of(stack, a) in owners
    }  # fmt: skip
    delivered = {
        str(d["request_id"]) for d in stack.deliveries() if d["status"] == 200 and d["at"] <= at
    }
    return len(accepted - delivered)


async def destinations_slow(stack: Stack) -> None:
    """Every destination answers in ``SLOW`` s for ``SLOW_WINDOW`` s. A routed owner's lane
    delivers several at once (``max_concurrency``, the default), so its backlog must not grow
    (the control); a ``forward_url`` owner's webhook is stored as before ``forward_url`` was a
    route (not migrated), so its events go one at a time on the old path, its backlog grows,
    and is reported beside it."""
    await stack.destination_mode("slow")
    start = time.time()
    await asyncio.sleep(SLOW_WINDOW)
    end = time.time()
    await stack.destination_mode("ok")
    routed, forwarded = set(stack.routed), {t.path.split("/")[2] for t in stack.targets}
    forwarded -= routed
    sent = sum(
        1 for a in stack.accepted(start + SETTLE)
        if a["answered"] <= end and _owner_of(stack, a) in routed
    )  # fmt: skip
    grew = {
        name: _backlog(stack, owners, end) - _backlog(stack, owners, start + SETTLE)
        for name, owners in (("routes", routed), ("forward_url", forwarded))
    }
    stack.controls["keeps_up"] = {
        "answer_s": SLOW, "window_s": SLOW_WINDOW - SETTLE, "routed_sent": sent,
        "routed_backlog_growth": grew["routes"], "forward_url_backlog_growth": grew["forward_url"],
        "ok": grew["routes"] <= KEEP_UP * sent,
    }  # fmt: skip


HANG_WINDOW: Final = 30.0
HANG_QUIET: Final = 20.0
"""Seconds of normal load before each hang (the first after the warm-up, the second once what
the first hang held is delivered)."""
HANG_CYCLES: Final = 2
HANG_RATE: Final = 40.0
"""The hang scenario's load: well below what the whole stack on one 2-core machine fully
processes, so a latency percentile measures the destinations' isolation rather than the
queueing of a saturated machine (at the suite's rate the p99 before the hang alone is seconds
and moves by more than the allowed shift between two quiet windows)."""
P99_SHIFT: Final = 0.010
"""How much the other destinations' p99 latency may move while some hang (seconds)."""


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


Window = tuple[float, float]


async def _alternating(
    stack: Stack, others: set[str], fault: Callable[[], Awaitable[Window]], shift: float
) -> dict[str, Any]:
    """``HANG_CYCLES`` times: ``HANG_QUIET`` s of normal load, then ``fault`` (which returns
    the time it lasted). The ``others``' latency (sent → arrival at their destination) while
    the fault lasts, from ``SETTLE`` s into it, pooled, must keep its p99 within ``shift`` of
    the quiet windows' pooled. Alternating, rather than one window before and one during,
    spreads the machine's own stalls over both sides."""
    quiet: list[Window] = []
    faulted: list[Window] = []
    for _ in range(HANG_CYCLES):
        since = time.time()
        await asyncio.sleep(HANG_QUIET)
        quiet.append((since, time.time()))
        start, end = await fault()
        faulted.append((start + SETTLE, end))
    sent = {
        str(a["request_id"]): float(a["sent"]) for a in stack.accepted()
        if _owner_of(stack, a) in others
    }  # fmt: skip
    firsts: dict[str, float] = {}
    for d in stack.deliveries():
        if d["status"] == 200 and d["request_id"] in sent:
            firsts.setdefault(d["request_id"], float(d["at"]) - sent[d["request_id"]])

    def pooled(windows: list[Window]) -> list[float]:
        return [
            lat for r, lat in firsts.items() if any(a <= sent[r] < b for a, b in windows)
        ]  # fmt: skip

    before, during = pooled(quiet), pooled(faulted)
    return {
        "others": len(others), "cycles": HANG_CYCLES,
        "window_s": round(sum(b - a for a, b in faulted), 1),
        "p99_before_ms": round(_p99(before) * 1000, 1), "p99_during_ms": round(_p99(during) * 1000, 1),
        "allowed_ms": round(shift * 1000), "samples": [len(before), len(during)],
        "ok": _p99(during) - _p99(before) <= shift,
    }  # fmt: skip


async def half_the_destinations_hang(stack: Stack) -> None:
    """Half of the routed owners' destinations hang (no answer until the forward timeout) for
    ``HANG_WINDOW`` s, twice (``_alternating``): the other routed owners' p99 must hold within
    ``P99_SHIFT`` (no head-of-line blocking across destinations)."""
    hung = stack.routed[: len(stack.routed) // 2]

    async def hang() -> Window:
        start = time.time()
        await stack.destination_mode("hang", [f"/{owner}" for owner in hung])
        await asyncio.sleep(HANG_WINDOW)
        end = time.time()
        await stack.destination_mode(None, [f"/{owner}" for owner in hung])
        # what the hung destinations held goes out at once: a burst that loads the whole
        # machine, and no quiet window for the comparison
        await until(lambda: _backlog(stack, set(hung), time.time()) == 0, DRAIN, interval=0.5,
                    what="the hung destinations' backlog delivered")  # fmt: skip
        return start, end

    others = set(stack.routed[len(stack.routed) // 2 :])
    stack.controls["isolation"] = {
        "hung": len(hung),
        **await _alternating(stack, others, hang, P99_SHIFT),
    }


SPIN_P99_SHIFT: Final = 0.020
"""How much the other owners' p99 latency may move while one owner's transformation spins."""
SPIN_EVERY: Final = 3.0
"""Seconds between two versions of the spinning code: a transformation failing 5 times in a row
at one version is suspended, and each spin fails after its 1 s of CPU."""
SPIN = "addHandler('transform', (request) => { while (true) {} });"


async def a_transformation_spins(stack: Stack) -> None:
    """The first routed owner's transformation (``Stack.spinner``) spins to its CPU limit on
    every event for ``HANG_WINDOW`` s, twice (``_alternating``; a new version every
    ``SPIN_EVERY`` s so that it is never suspended): the other routed owners' p99 must hold
    within ``SPIN_P99_SHIFT``."""

    async def spin() -> Window:
        start = time.time()
        version = 0
        while time.time() < start + HANG_WINDOW:
            await stack.spin(f"{SPIN}\n// {version}")
            version += 1
            await asyncio.sleep(SPIN_EVERY)
        end = time.time()
        await stack.spin(THROWS)
        return start, end

    others = set(stack.routed[1:])
    stack.controls["transform_isolation"] = await _alternating(stack, others, spin, SPIN_P99_SHIFT)


DOWN_WINDOW: Final = 300.0
"""How long the down destinations answer 503 (the issue's "down for 5 minutes")."""
DOWN_RATE: Final = 40.0
"""The down scenario's load: below saturation, so that five minutes of held deliveries and
their drain stay within the suite's drain time on 2 cores."""
MAX_PROBES: Final = 5
"""Attempts a down destination may get from ``SETTLE`` s into the outage to its end: its breaker
opened within seconds, then one probe per cool-down (30 s doubling: 3 in 5 minutes)."""


async def routed_destinations_down(stack: Stack) -> None:
    """Every routed owner's first destination answers 503 for ``DOWN_WINDOW`` s while their
    second keeps answering; the window is kept in ``controls`` for ``down_verified``."""
    paths = [f"/{owner}" for owner in stack.routed]
    start = time.time()
    await stack.destination_mode("unavailable", paths)
    await asyncio.sleep(DOWN_WINDOW)
    end = time.time()
    await stack.destination_mode(None, paths)
    stack.controls["down"] = {"window": [start, end], "ok": False}


def down_verified(stack: Stack, topic_order: list[str]) -> None:
    """After the drain: while down, each first destination got at most ``MAX_PROBES``
    attempts (held, not hammered); each owner's alert channel heard exactly one
    ``issue.opened`` and one ``issue.resolved``, both about that destination, and nothing about
    the second; the second destinations' backlog did not grow (5 % of what was sent allowed).
    Nothing lost and everything delivered after recovery: the checker's verdict."""
    del topic_order
    start, end = stack.controls["down"]["window"]
    owner_of = {str(a["request_id"]): _owner_of(stack, a) for a in stack.accepted()}
    probes: dict[str, int] = {f"/{owner}": 0 for owner in stack.routed}
    told: dict[str, list[tuple[str, str]]] = {owner: [] for owner in stack.routed}
    second: dict[str, float] = {}
    for d in stack.deliveries():
        path = str(d["path"])
        if "notification" in d:
            owner = path.removeprefix("/_alerts/")
            told.setdefault(owner, []).append((str(d["notification"]), str(d["destination"])))
        elif path in probes and start + SETTLE <= float(d["at"]) <= end:
            probes[path] += 1
        elif path.endswith("/2") and d["status"] == 200:
            second.setdefault(str(d["request_id"]), float(d["at"]))
    expected = [("issue.opened", ROUTED_DESTINATION), ("issue.resolved", ROUTED_DESTINATION)]
    alerts_ok = all(sorted(told.get(owner, [])) == expected for owner in stack.routed)

    def backlog(at: float) -> int:
        return sum(
            1 for a in stack.accepted()
            if a["answered"] <= at and owner_of[str(a["request_id"])] in stack.routed
            and second.get(str(a["request_id"]), float("inf")) > at
        )  # fmt: skip

    sent = sum(
        1 for a in stack.accepted()
        if start + SETTLE <= a["answered"] <= end and owner_of[str(a["request_id"])] in stack.routed
    )  # fmt: skip
    grew = backlog(end) - backlog(start + SETTLE)
    stack.controls["down"] = {
        "down_s": round(end - start, 1), "destinations": len(probes),
        "max_attempts_while_down": max(probes.values(), default=0),
        "notifications": sum(len(t) for t in told.values()),
        "alerts_ok": alerts_ok, "second_sent": sent, "second_backlog_growth": grew,
        "ok": max(probes.values(), default=0) <= MAX_PROBES and alerts_ok
        and grew <= KEEP_UP * sent,
    }  # fmt: skip


def serial_in_order(stack: Stack, topic_order: list[str]) -> None:
    """``max_concurrency: 1`` held: no attempt to a routed destination overlapped another, and
    each destination's first deliveries came in the order its owner's events are on the
    events topic (a redelivery after the kill is a duplicate, not a reordering)."""
    owner_of = {str(a["request_id"]): stack.targets[int(a["target"])].path.split("/")[2]
                for a in stack.accepted()}  # fmt: skip
    overlapped, out_of_order, paths = 0, 0, stack.routed_paths
    firsts: dict[str, list[str]] = {path: [] for path in paths}
    seen: set[tuple[str, str]] = set()
    for d in stack.deliveries():
        if d["path"] not in paths:
            continue
        overlapped += int(d["concurrent"] > 1)
        if d["status"] == 200 and (d["request_id"], d["path"]) not in seen:
            seen.add((d["request_id"], d["path"]))
            firsts[d["path"]].append(d["request_id"])
    for path, owner in paths.items():
        order = [r for r in topic_order if owner_of.get(r) == owner]
        position = {r: i for i, r in enumerate(order)}
        got = [position[r] for r in firsts[path] if r in position]
        out_of_order += sum(1 for a, b in itertools.pairwise(got) if b < a)
    stack.controls["serial"] = {
        "destinations": len(paths), "overlapping_attempts": overlapped,
        "out_of_order": out_of_order, "ok": not overlapped and not out_of_order,
    }  # fmt: skip


def _accepted_since(stack: Stack, since: float) -> bool:
    return len(stack.accepted(since)) > 0


def in_turn(name: str, *scenarios: Scenario) -> Scenario:
    """One scenario of several faults, one after the other on one stack, each once the load
    flows again after the one before: what ``make test`` runs, one stack's start and drain for
    all of them."""

    async def fault(stack: Stack) -> None:
        for index, one in enumerate(scenarios):
            if index:
                await until(partial(_accepted_since, stack, time.time()), 120, interval=0.05,
                            what=f"load accepted before {one.name}")  # fmt: skip
            await one.fault(stack)

    return Scenario(name, "in turn: " + ", ".join(s.name for s in scenarios), fault)


SCENARIOS = [
    Scenario("baseline", "no fault (and the checker's self-check on its data)", no_fault),
    Scenario(
        "destinations-hang",
        f"half the routed destinations hang for {HANG_WINDOW:g} s, twice, at {HANG_RATE:g} "
        "events/s; the others' p99 holds",
        half_the_destinations_hang,
        rate=HANG_RATE,
    ),
    Scenario(
        "transform-spins",
        f"one owner's transformation spins on every event for {HANG_WINDOW:g} s, twice, at "
        f"{HANG_RATE:g} events/s; the other owners' p99 holds",
        a_transformation_spins,
        rate=HANG_RATE,
        spinner=True,
    ),
    Scenario(
        "forwarder-kill", "kill -9 of the forwarder, restarted 5 s later", _killed("forwarder")
    ),
    Scenario("recorder-kill", "kill -9 of the recorder, restarted 5 s later", _killed("recorder")),
    Scenario(
        "all-killed",
        "kill -9 of the forwarder, recorder, stats processor and dashboard at once, back 5 s later",
        _killed("forwarder", "recorder", "stats", "dashboard"),
    ),
    Scenario("kafka-restart", "Kafka stopped for 10 s, then started", _servers_restarted("kafka")),
    Scenario(
        "store-restart",
        "FerretDB and its PostgreSQL stopped for 10 s, then started",
        _servers_restarted("postgres", "ferretdb"),
    ),
    Scenario(
        "ingest-sigterm",
        "SIGTERM of one ingest replica (the other serving), back 10 s later",
        ingest_replica_terminated,
    ),
    Scenario(
        "destination-down",
        "the destination answers 503 for 10 s, then hangs for 10 s",
        destination_unavailable_then_hanging,
    ),
    Scenario("redis-stop", "Redis stopped for 10 s, then started", _servers_restarted("redis")),
    Scenario(
        "destinations-paused",
        "every routed owner's destination paused for 20 s, then resumed",
        routed_destinations_paused,
    ),
    Scenario(
        "fan-out",
        "every routed owner's events fan out to 3 destinations; kill -9 of the forwarder",
        _killed("forwarder"),
        fan_out=3,
    ),
    Scenario(
        "rate-limited",
        f"every routed destination limited to {RATE}/s for {RATE_WINDOW:g} s, measured there",
        routed_rate_limited,
    ),
    Scenario(
        "serial-forwarder-kill",
        "routed destinations at max_concurrency 1; kill -9 of the forwarder",
        _killed("forwarder"),
        routed_fields={"max_concurrency": 1},
        verify=serial_in_order,
    ),
    Scenario(
        "slow-destinations",
        f"every destination answers in {SLOW:g} s for {SLOW_WINDOW:g} s; routed owners keep up",
        destinations_slow,
    ),
    Scenario(
        "routed-destination-down",
        f"every routed owner's first destination answers 503 for {DOWN_WINDOW / 60:g} min at "
        f"{DOWN_RATE:g} events/s: held, one alert each, delivered after; the second unaffected",
        routed_destinations_down,
        fan_out=2,
        verify=down_verified,
        rate=DOWN_RATE,
        alerts=True,
    ),
    Scenario(
        "forward-url-routed",
        "every forward_url delivered as its route (migrated); kill -9 of the forwarder",
        _killed("forwarder"),
        forward_routes=True,
    ),
    Scenario(
        "store-read-only",
        "the store's PostgreSQL refuses every write for 20 s (disk full)",
        store_refuses_writes,
    ),
]


async def run(
    infra: Infra, scenario: Scenario, workdir: Path, rate: float, timing: Timing = FULL
) -> dict[str, Any]:
    """One scenario from a fresh stack to its figures (``verdict`` included)."""
    rate = scenario.rate or rate
    async with Stack(
        infra,
        scenario.name,
        workdir / scenario.name,
        timing.hold,
        fan_out=scenario.fan_out,
        routed_fields=scenario.routed_fields,
        forward_routes=scenario.forward_routes,
        alerts=scenario.alerts,
        spinner=scenario.spinner,
    ) as stack:
        await stack.start_load(rate)
        await until(lambda: len(stack.accepted()) >= rate * timing.warm * 0.8, 120, interval=0.2,
                    what="load accepted before the fault")  # fmt: skip
        fault_at = time.time()
        await scenario.fault(stack)
        back_at = time.time()
        before = {str(a["request_id"]) for a in stack.accepted()}
        await until(lambda: len(stack.accepted(back_at)) > 0, 120, interval=0.05,
                    what="ingest answers 200 after the fault")  # fmt: skip
        first_200 = min(a["answered"] for a in stack.accepted(back_at)) - back_at
        await until(lambda: before <= stack.delivered(), DRAIN, interval=0.2,
                    what="everything accepted before the fault's end delivered")  # fmt: skip
        caught_up = time.time() - back_at
        await until(lambda: len(stack.accepted(back_at)) >= rate * timing.after * 0.8, 120,
                    interval=0.2, what="load accepted after the fault")  # fmt: skip
        await stack.stop_load()
        stopped_at = time.time()
        stored = await stack.drained(DRAIN)
        drain = time.time() - stopped_at
        in_kafka = await stack.in_kafka()
        counted = await stack.counted_by_stats(len(in_kafka), STATS_WAIT)
        verdict = check(
            stack.answers(), in_kafka, stored, stack.deliveries(), counted_by_stats=counted,
            copies=stack.copies, failing=stack.failing,
        )  # fmt: skip
        if scenario.verify is not None:
            scenario.verify(stack, list(in_kafka))
        figures: dict[str, Any] = {
            "scenario": scenario.name, "title": scenario.title, "rate": rate,
            "fault_s": round(back_at - fault_at, 1), "first_200_after_s": round(first_200, 2),
            "caught_up_s": round(caught_up, 1), "drain_s": round(drain, 1),
            "unavailable_during_fault": sum(
                1 for a in stack.answers()
                if a["status"] == 503 and fault_at <= a["sent"] <= back_at + 30
            ),
            "exited": stack.exited(), "verdict": verdict.as_dict(),
        }  # fmt: skip
        if stack.controls:
            figures["controls"] = stack.controls
        if scenario.name == "baseline":
            figures["self_check"] = await self_check(stack, in_kafka, stored, verdict)
        return figures


async def self_check(
    stack: Stack, in_kafka: dict[str, str], stored: dict[str, tuple[str, str]], clean: Verdict
) -> dict[str, Any]:
    """Plant faults in the real store and destination log of a drained run — events deleted,
    bodies overwritten, deliveries repeated and one with other bytes — and check that the checker
    counts exactly those on top of what the clean run had."""
    accepted = [str(a["request_id"]) for a in stack.accepted()]
    lose, corrupt, repeat, bad = accepted[10:13], accepted[20:22], accepted[30:34], accepted[40:41]
    events, bodies = stack.db[Collections.EVENTS], stack.db[Collections.EVENT_BODIES]
    for request_id in lose:
        await events.delete_one({"request_id": request_id})
    for request_id in corrupt:
        head = await events.find_one({"request_id": request_id})
        assert head is not None
        await bodies.update_one(
            {"_id": head["_id"]}, {"$set": body_to_document("request_body", b"planted")}
        )
    firsts: dict[str, dict[str, Any]] = {}
    for line in stack.deliveries():
        if line["status"] == 200:
            firsts.setdefault(line["request_id"], line)
    with stack.deliveries.path.open("a") as log:
        for request_id in repeat:
            log.write(json.dumps(firsts[request_id]) + "\n")
        for request_id in bad:
            log.write(json.dumps(dict(firsts[request_id], sha256="0" * 64)) + "\n")
    verdict = check(stack.answers(), in_kafka, await stack.stored(), stack.deliveries())
    planted = {"lost_in_store": 3, "corrupt_in_store": 2, "duplicate_deliveries": 5,
               "corrupt_deliveries": 1}  # fmt: skip
    counted = {
        "lost_in_store": verdict.lost_in_store - clean.lost_in_store,
        "corrupt_in_store": verdict.corrupt_in_store - clean.corrupt_in_store,
        "duplicate_deliveries": verdict.duplicate_deliveries - clean.duplicate_deliveries,
        "corrupt_deliveries": verdict.corrupt_deliveries - clean.corrupt_deliveries,
    }
    return {"planted": planted, "counted": counted, "exact": planted == counted}

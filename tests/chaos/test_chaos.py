"""The short version of the chaos suite in ``make test``: four faults that need no server of their
own (the test session's Kafka, FerretDB and Redis are shared), a few seconds each, one after the
other on one stack of real processes, and every accepted event checked end to end. ``make chaos``
runs the full matrix, each fault on a stack of its own (``scripts/chaos.py``,
docs/reliability.md)."""

from __future__ import annotations

from pathlib import Path

from tests.chaos import scenarios
from tests.chaos.stack import Infra

RATE = 40.0
SHORT = ("forwarder-kill", "ingest-sigterm", "destination-down", "destinations-paused")
"""Faults of hookbay's own processes, of the destination and of its configuration: safe
beside other tests."""


async def test_nothing_accepted_is_lost_through_the_faults(
    env: dict[str, str], tmp_path: Path
) -> None:
    infra = Infra.shared(
        env["HOOKBAY_KAFKA_BOOTSTRAP"], env["HOOKBAY_MONGO_URL"].rsplit("/", 1)[0],
        env["HOOKBAY_REDIS_URL"],
    )  # fmt: skip
    chosen = [s for n in SHORT for s in scenarios.SCENARIOS if s.name == n]
    assert [s.name for s in chosen] == list(SHORT)
    scenario = scenarios.in_turn("own-faults", *chosen)
    figures = await scenarios.run(infra, scenario, tmp_path, RATE, scenarios.SHORT)
    verdict = figures["verdict"]
    assert verdict["ok"], verdict
    assert verdict["accepted"] >= RATE * (scenarios.SHORT.warm + scenarios.SHORT.after) * 0.8
    assert figures["exited"] == {}, figures["exited"]

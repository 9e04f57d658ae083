"""The chaos suite's checker: every request answered 200 is in Kafka, stored with its final status
and delivered at least once, byte-exact; during a fault the only other answer is the documented
503 with ``Retry-After``.

It works on four plain views of a run, so it can be proven on planted faults (``test_checker``,
and the self-check of every ``make chaos`` run on its real data (``scenarios.self_check``)):

- ``answers``: the load client's lines (``tests/support/load.py --mix``);
- ``in_kafka``: request id → body SHA-256 of every event record on the events topic;
- ``stored``: request id → (status, body SHA-256) of every event the store lists;
- ``deliveries``: the destination's lines (``tests/chaos/destination.py``), by request and path:
  a request whose webhook fans out (``copies``: target index → routes, default 1) must reach
  that many paths; a ``failing`` target's events (one of its routes fails on purpose) end
  ``failed`` instead of ``success``, once delivered to as many paths;
- ``counted_by_stats`` (optional): the events the stats processor counted for the owners'
  webhooks (received and rejected), which must equal the events on the topic: none lost, none
  counted twice, whatever the fault did to its consumer group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

FINAL = "success"
"""The final status every accepted event must reach: the destination answers 200 in the end."""
FAILED = "failed"
"""The final status of an event of a ``failing`` target (one of its routes fails on purpose)."""


@dataclass
class Verdict:
    sent: int = 0
    accepted: int = 0
    unavailable: int = 0
    """503 answers with ``Retry-After`` (the documented answer while a dependency is away)."""
    unexpected: dict[str, int] = field(default_factory=dict)
    """Any other answer, by status (``0``: none at all; ``503-no-retry-after``)."""
    lost_in_kafka: int = 0
    corrupt_in_kafka: int = 0
    lost_in_store: int = 0
    corrupt_in_store: int = 0
    not_final: dict[str, int] = field(default_factory=dict)
    """Stored accepted events whose status is not ``success``, by status."""
    undelivered: int = 0
    """Accepted requests that did not reach every path they fan out to."""
    corrupt_deliveries: int = 0
    duplicate_deliveries: int = 0
    """Successful deliveries beyond the first of a request to a path (at-least-once: allowed,
    counted)."""
    stored_unacknowledged: int = 0
    """Stored events whose request got no 200 (a 503 after a produce timeout may still have been
    written, README: allowed, counted)."""
    stats_miscounted: int | None = None
    """Events the stats processor counted minus the events on the topic (``None``: not looked
    at)."""
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.unexpected or self.lost_in_kafka or self.corrupt_in_kafka or self.lost_in_store
            or self.corrupt_in_store or self.not_final or self.undelivered
            or self.corrupt_deliveries or self.stats_miscounted
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def check(
    answers: Iterable[Mapping[str, Any]],
    in_kafka: Mapping[str, str],
    stored: Mapping[str, tuple[str, str]],
    deliveries: Iterable[Mapping[str, Any]],
    *,
    counted_by_stats: int | None = None,
    copies: Mapping[int, int] | None = None,
    failing: Collection[int] = (),
    examples: int = 10,
) -> Verdict:
    verdict = Verdict()
    expected: dict[str, str] = {}
    wanted: dict[str, int] = {}
    final: dict[str, str] = {}
    unexpected: Counter[str] = Counter()

    def example(text: str) -> None:
        if len(verdict.examples) < examples:
            verdict.examples.append(text)

    for answer in answers:
        verdict.sent += 1
        status = int(answer["status"])
        if status == 200:
            verdict.accepted += 1
            expected[str(answer["request_id"])] = str(answer["sha256"])
            target = int(answer.get("target", -1))
            wanted[str(answer["request_id"])] = (copies or {}).get(target, 1)
            final[str(answer["request_id"])] = FAILED if target in failing else FINAL
        elif status == 503 and answer.get("retry_after"):
            verdict.unavailable += 1
        else:
            kind = "503-no-retry-after" if status == 503 else str(status)
            unexpected[kind] += 1
            example(f"answer {kind} to request {answer['n']}: {answer.get('answer', '')[:120]}")
    verdict.unexpected = dict(unexpected)

    delivered: Counter[tuple[str, str]] = Counter()
    paths: dict[str, set[str]] = {}
    for delivery in deliveries:
        if int(delivery["status"]) != 200 or "notification" in delivery:
            continue  # an issue notification is not an event's delivery
        request_id = str(delivery["request_id"])
        delivered[request_id, str(delivery.get("path", ""))] += 1
        paths.setdefault(request_id, set()).add(str(delivery.get("path", "")))
        want = expected.get(request_id, in_kafka.get(request_id))
        if want is not None and delivery["sha256"] != want:
            verdict.corrupt_deliveries += 1
            example(f"delivered {request_id} with other bytes")
    verdict.duplicate_deliveries = sum(count - 1 for count in delivered.values() if count > 1)

    not_final: Counter[str] = Counter()
    for request_id, sha in expected.items():
        if request_id not in in_kafka:
            verdict.lost_in_kafka += 1
            example(f"{request_id} answered 200, not in Kafka")
        elif in_kafka[request_id] != sha:
            verdict.corrupt_in_kafka += 1
            example(f"{request_id} in Kafka with other bytes")
        if request_id not in stored:
            verdict.lost_in_store += 1
            example(f"{request_id} answered 200, not stored")
        else:
            stored_status, stored_sha = stored[request_id]
            if stored_sha != sha:
                verdict.corrupt_in_store += 1
                example(f"{request_id} stored with other bytes")
            if stored_status != final[request_id]:
                not_final[stored_status] += 1
                example(f"{request_id} stored as {stored_status}")
        reached = len(paths.get(request_id, ()))
        if reached < wanted[request_id]:
            verdict.undelivered += 1
            example(f"{request_id} answered 200, delivered to {reached} of {wanted[request_id]}")
    verdict.not_final = dict(not_final)
    verdict.stored_unacknowledged = sum(1 for request_id in stored if request_id not in expected)
    if counted_by_stats is not None:
        verdict.stats_miscounted = counted_by_stats - len(in_kafka)
        if verdict.stats_miscounted:
            example(f"the stats counted {counted_by_stats} events, {len(in_kafka)} on the topic")
    return verdict

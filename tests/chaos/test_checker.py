"""The chaos checker proves itself: on a clean run it finds nothing, and on planted losses,
duplicates and corruptions it counts exactly those (every ``make chaos`` repeats this on a real
run's data, planted in the real store and destination log: ``scenarios.self_check``)."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from tests.chaos.checker import check


def clean_run(n: int = 300) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, Any], list[dict[str, Any]]]:  # fmt: skip
    answers, in_kafka, stored, deliveries = [], {}, {}, []
    for i in range(n):
        sha = hashlib.sha256(str(i).encode()).hexdigest()
        if i % 10 == 9:  # a 503 with Retry-After: documented, not a failure
            answers.append({"n": i, "status": 503, "retry_after": "5", "sha256": sha})
            continue
        request_id = f"req_{i}"
        answers.append({"n": i, "status": 200, "request_id": request_id, "sha256": sha})
        in_kafka[request_id] = sha
        stored[request_id] = ("success", sha)
        if i % 7 == 0:  # a failed attempt first
            deliveries.append({"request_id": request_id, "status": 503, "sha256": sha})
        deliveries.append({"request_id": request_id, "status": 200, "sha256": sha})
    return answers, in_kafka, stored, deliveries


def test_a_clean_run_passes_with_nothing_counted() -> None:
    answers, in_kafka, stored, deliveries = clean_run()
    verdict = check(answers, in_kafka, stored, deliveries)
    assert verdict.ok
    assert (verdict.sent, verdict.accepted, verdict.unavailable) == (300, 270, 30)
    assert verdict.as_dict() | {"sent": 0, "accepted": 0, "unavailable": 0} == {
        "sent": 0, "accepted": 0, "unavailable": 0, "unexpected": {}, "lost_in_kafka": 0,
        "corrupt_in_kafka": 0, "lost_in_store": 0, "corrupt_in_store": 0, "not_final": {},
        "undelivered": 0, "corrupt_deliveries": 0, "duplicate_deliveries": 0,
        "stored_unacknowledged": 0, "stats_miscounted": None, "examples": [], "ok": True,
    }  # fmt: skip


def test_planted_faults_are_counted_exactly() -> None:
    answers, in_kafka, stored, deliveries = clean_run()
    rng = random.Random(7)
    accepted = [a["request_id"] for a in answers if a["status"] == 200]
    picks = iter(rng.sample(accepted, 60))  # every fault on a request of its own

    def take(k: int) -> list[str]:
        return [next(picks) for _ in range(k)]

    for request_id in take(3):
        del in_kafka[request_id]
    for request_id in take(4):
        in_kafka[request_id] = "0" * 64
    for request_id in take(5):
        del stored[request_id]
    for request_id in take(6):
        stored[request_id] = ("success", "1" * 64)
    for request_id in take(2):
        stored[request_id] = ("pending", stored[request_id][1])
    for request_id in take(1):
        stored[request_id] = ("failed", stored[request_id][1])
    for request_id in take(7):
        deliveries[:] = [d for d in deliveries if d["request_id"] != request_id]
    for request_id in take(8):  # delivered once more with other bytes: corrupt, and a duplicate
        deliveries.append({"request_id": request_id, "status": 200, "sha256": "2" * 64})
    for request_id in take(9):
        deliveries.append({"request_id": request_id, "status": 200, "sha256": in_kafka[request_id]})
    stored["req_unanswered"] = ("success", "3" * 64)
    answers += [
        {"n": 1000, "status": 500, "answer": "boom"},
        {"n": 1001, "status": 0},
        {"n": 1002, "status": 0},
        {"n": 1003, "status": 503, "retry_after": None},
        {"n": 1004, "status": 404, "answer": "{}"},
    ]

    verdict = check(answers, in_kafka, stored, deliveries, examples=100)

    assert not verdict.ok
    assert verdict.unexpected == {"500": 1, "0": 2, "503-no-retry-after": 1, "404": 1}
    assert (verdict.lost_in_kafka, verdict.corrupt_in_kafka) == (3, 4)
    assert (verdict.lost_in_store, verdict.corrupt_in_store) == (5, 6)
    assert verdict.not_final == {"pending": 2, "failed": 1}
    assert verdict.undelivered == 7
    assert verdict.corrupt_deliveries == 8
    assert verdict.duplicate_deliveries == 8 + 9
    assert verdict.stored_unacknowledged == 1
    assert len(verdict.examples) == 5 + 3 + 4 + 5 + 6 + 3 + 7 + 8


def test_each_kind_of_fault_alone_fails_the_run() -> None:
    def planted(plant: Any) -> bool:
        answers, in_kafka, stored, deliveries = clean_run(30)
        plant(answers, in_kafka, stored, deliveries)
        return check(answers, in_kafka, stored, deliveries).ok

    assert not planted(lambda a, k, s, d: k.pop("req_0"))
    assert not planted(lambda a, k, s, d: k.update(req_0="x"))
    assert not planted(lambda a, k, s, d: s.pop("req_0"))
    assert not planted(lambda a, k, s, d: s.update(req_0=("success", "x")))
    assert not planted(lambda a, k, s, d: s.update(req_0=("pending", k["req_0"])))
    assert not planted(lambda a, k, s, d: d.__setitem__(slice(None), d[2:]))
    assert not planted(
        lambda a, k, s, d: d.append({"request_id": "req_1", "status": 200, "sha256": "x"})
    )
    assert not planted(lambda a, k, s, d: a.append({"n": 99, "status": 502}))
    # at-least-once: an exact duplicate and an unacknowledged stored event are counted, not failed
    assert planted(lambda a, k, s, d: d.append(dict(d[-1])))
    assert planted(lambda a, k, s, d: s.update(req_x=("success", "y")))


def test_the_stats_must_count_every_event_on_the_topic_once() -> None:
    answers, in_kafka, stored, deliveries = clean_run()
    on_topic = len(in_kafka)
    exact = check(answers, in_kafka, stored, deliveries, counted_by_stats=on_topic)
    assert (exact.ok, exact.stats_miscounted) == (True, 0)
    short = check(answers, in_kafka, stored, deliveries, counted_by_stats=on_topic - 2)
    assert (short.ok, short.stats_miscounted) == (False, -2)
    assert short.examples == [f"the stats counted {on_topic - 2} events, {on_topic} on the topic"]
    twice = check(answers, in_kafka, stored, deliveries, counted_by_stats=on_topic + 1)
    assert (twice.ok, twice.stats_miscounted) == (False, 1)


def test_a_fanned_out_request_must_reach_each_of_its_paths() -> None:
    """Requests of target 0 fan out to 3 paths: each path once is delivered, two of three is
    not, and a path twice is a duplicate (at-least-once)."""
    answers, in_kafka, stored, deliveries = clean_run(20)
    for answer in answers:
        answer["target"] = answer["n"] % 2
    fanned = [a["request_id"] for a in answers if a["status"] == 200 and a["target"] == 0]
    first = {d["request_id"]: d for d in deliveries if d["status"] == 200}
    for request_id in fanned:
        first[request_id]["path"] = "/a"
        deliveries += [dict(first[request_id], path="/b"), dict(first[request_id], path="/c")]
    assert check(answers, in_kafka, stored, deliveries, copies={0: 3}).ok
    assert not check(answers, in_kafka, stored, deliveries, copies={0: 4}).ok
    short = [d for d in deliveries if not (d["request_id"] == fanned[0] and d.get("path") == "/c")]
    missing = check(answers, in_kafka, stored, short, copies={0: 3}, examples=5)
    assert (missing.undelivered, missing.examples) == (
        1, [f"{fanned[0]} answered 200, delivered to 2 of 3"],
    )  # fmt: skip
    again = check(answers, in_kafka, stored, [*deliveries, dict(first[fanned[1]])], copies={0: 3})
    assert (again.ok, again.duplicate_deliveries) == (True, 1)


def test_a_failing_targets_events_must_end_failed_and_still_be_delivered() -> None:
    """Target 0's events have a route that fails on purpose: stored ``failed`` they pass (and
    ``success`` does not), and they must still reach their paths."""
    answers, in_kafka, stored, deliveries = clean_run(20)
    for answer in answers:
        answer["target"] = answer["n"] % 2
    failing = [a["request_id"] for a in answers if a["status"] == 200 and a["target"] == 0]
    assert not check(answers, in_kafka, stored, deliveries, failing={0}).ok
    for request_id in failing:
        stored[request_id] = ("failed", stored[request_id][1])
    assert check(answers, in_kafka, stored, deliveries, failing={0}).ok
    unfailed = check(answers, in_kafka, stored, deliveries)
    assert unfailed.not_final == {"failed": len(failing)}
    undelivered = [d for d in deliveries if d["request_id"] != failing[0]]
    assert check(answers, in_kafka, stored, undelivered, failing={0}).undelivered == 1

"""Retention benchmark: events pruned per second, on a FerretDB of its own.

Loads ``--events`` events (half of them expired: free-plan owners' events 31-400 days old; the
other half pro owners' events of the same ages, which pro keeps), each with one attempt, with
``insert_many`` in chunks of 1000 ``event_to_document`` / ``attempt_to_document`` documents, then
times one retention run (``RetentionJob.run``, the code ``python -m hookbay_retention`` runs) and
checks that exactly the expired events and their attempts are gone. Prints the rate (target
>= 20,000 events/s) and each batch's time split into find / delete attempts / delete events.

Run it against a server nobody else uses (the script drops its database first)::

    export HOOKBAY_INFRA_RUN=$PWD/.cache/bench-retention HOOKBAY_INFRA_KAFKA_PORT=39092 \\
      HOOKBAY_INFRA_MONGO_PORT=27029 HOOKBAY_INFRA_REDIS_PORT=36379 HOOKBAY_INFRA_PG_PORT=35433
    deploy/local/infra.sh up ferretdb
    .venv/bin/python scripts/bench_retention.py --events 100000
    deploy/local/infra.sh down

``--budget`` caps the run's wall time: a run still going then is cancelled (between two
statements, like a kill) and the figures cover the batches it finished.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchlib import write_doc_block

from hookbay_common.clock import utcnow
from hookbay_common.db import (
    AttemptRepository,
    EventRepository,
    LockRepository,
    SessionRepository,
    UserRepository,
)
from hookbay_common.db import client as db_client
from hookbay_common.db.client import Collections, Database
from hookbay_common.db.events import attempt_to_document, event_to_document
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.logs import configure_logging
from hookbay_common.models import Attempt, AttemptTrigger, Event, Role, User
from hookbay_common.plans import load_plans
from hookbay_retention.service import OwnerReport, RetentionJob

CHUNK = 1000
IN_FLIGHT = 4
BODY = b'{"type":"order.created","id":12345,"amount":4200,"currency":"EUR","note":"bench"}'


@dataclass
class Owner:
    username: str
    plan: str
    webhook_id: str


def _event(owner: Owner, created: datetime) -> Event:
    return Event(
        id=new_id(IdPrefix.EVENT), request_id=new_id(IdPrefix.REQUEST),
        webhook_id=owner.webhook_id, username=owner.username, webhook_name="orders",
        client_ip="203.0.113.7", request_headers={"content-type": "application/json"},
        body=BODY, content_type="application/json", forward_url="http://127.0.0.1:9/hook",
        created_at=created,
    )  # fmt: skip


def _attempt(event: Event) -> Attempt:
    return Attempt(
        id=new_id(IdPrefix.ATTEMPT), event_id=event.id, username=event.username,
        webhook_id=event.webhook_id, chain_id=new_id(IdPrefix.CHAIN), number=1,
        trigger=AttemptTrigger.INITIAL, url="http://127.0.0.1:9/hook",
        started_at=event.created_at + timedelta(seconds=1), status_code=200,
        response_headers={"content-type": "text/plain"}, response_body=b"ok", latency_ms=3.5,
    )  # fmt: skip


async def load(db: Database, total: int, owners_per_plan: int, now: datetime) -> float:
    """Create the owners and ``total`` events with one attempt each; the load's seconds."""
    users = UserRepository(db)
    owners = []
    for plan in ("free", "pro"):
        for i in range(owners_per_plan):
            owner = Owner(f"bench-{plan}-{i:03d}", plan, new_id(IdPrefix.WEBHOOK))
            await users.create(
                User(username=owner.username, plan=plan, role=Role.USER, created_at=now,
                     updated_at=now)
            )  # fmt: skip
            owners.append(owner)
    started = time.perf_counter()
    pending: set[asyncio.Task[Any]] = set()
    for start in range(0, total, CHUNK):
        count = min(CHUNK, total - start)
        events = [
            _event(owners[(start + i) % len(owners)], now - timedelta(days=31 + (start + i) % 370))
            for i in range(count)
        ]
        for collection, docs in (
            (Collections.EVENTS, [event_to_document(e) for e in events]),
            (Collections.ATTEMPTS, [attempt_to_document(_attempt(e)) for e in events]),
        ):
            if len(pending) >= IN_FLIGHT:
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            pending.add(asyncio.create_task(db[collection].insert_many(docs, ordered=False)))
        if (start // CHUNK) % 50 == 0:
            print(f"  loaded {start + count:,} events", flush=True)
    await asyncio.gather(*pending)
    return time.perf_counter() - started


async def anatomy(db: Database, batch_size: int) -> dict[str, float]:
    """Milliseconds of the parts of one statement, on the loaded data (before the run): a
    filter matching no document (PostgreSQL's scan of the table, nothing decoded), one owner's
    documents (the scan plus decoding and matching them in FerretDB), and the same owner with
    an ``$in`` of a batch of ids (what a delete statement selects)."""
    events = db[Collections.EVENTS]
    ids = [d["_id"] async for d in events.find({"username": "bench-free-000"}, {"_id": 1})]
    probes: dict[str, dict[str, Any]] = {
        "scan_only": {"username": "nobody"},
        "owner": {"username": "bench-free-000"},
        "owner_in_batch": {"username": "bench-free-000", "_id": {"$in": ids[:batch_size]}},
        "in_batch_without_owner": {"_id": {"$in": ids[:batch_size]}},
    }
    timings = {}
    for label, query in probes.items():
        started = time.perf_counter()
        await events.count_documents(query)
        timings[label] = round(1000 * (time.perf_counter() - started), 1)
    return timings


class Batches:
    """Counts what the run has done so far (it may be cancelled by the budget)."""

    def __init__(self) -> None:
        self.events = 0
        self.attempts = 0
        self.owners = 0

    def started(self, owners: int) -> None:
        return None

    def batch_done(self, events: int, attempts: int) -> None:
        self.events += events
        self.attempts += attempts

    def owner_done(self, owner: OwnerReport) -> None:
        self.owners += 1


async def main(args: argparse.Namespace) -> dict[str, Any]:
    mongo = db_client.connect(args.mongo_url, timeout_ms=20_000)
    db = db_client.database(mongo)
    try:
        print(f"dropping {db.name} and loading {args.events:,} events", flush=True)
        await mongo.drop_database(db.name)
        await db_client.migrate(db)
        await LockRepository(db).ensure_collection()
        now = utcnow()
        load_seconds = await load(db, args.events, args.owners_per_plan, now)
        print(f"loaded in {load_seconds:.1f} s", flush=True)
        parts = await anatomy(db, args.batch_size) if args.anatomy else {}
        print(f"one statement's parts (ms, events collection): {parts}", flush=True)
        job = RetentionJob(
            UserRepository(db), EventRepository(db), AttemptRepository(db),
            SessionRepository(db), LockRepository(db), load_plans(None),
            batch_size=args.batch_size, lease=max(60.0, args.budget),
        )  # fmt: skip
        seen = Batches()
        started = time.perf_counter()
        task = asyncio.create_task(job.run(now=now, observer=seen))
        done, _ = await asyncio.wait({task}, timeout=args.budget)
        finished = bool(done)
        if not finished:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        seconds = time.perf_counter() - started
        report = job.report
        remaining = remaining_attempts = None
        if finished:  # counting decodes every document on FerretDB v1: minutes at 1M
            remaining = await db[Collections.EVENTS].count_documents({})
            remaining_attempts = await db[Collections.ATTEMPTS].count_documents({})
        expected_left = args.events - args.events // 2
        result: dict[str, Any] = {
            "events_loaded": args.events,
            "expired": args.events // 2,
            "owners": 2 * args.owners_per_plan,
            "batch_size": args.batch_size,
            "load_seconds": round(load_seconds, 1),
            "finished": finished,
            "run_seconds": round(seconds, 2),
            "events_deleted": seen.events,
            "attempts_deleted": seen.attempts,
            "events_per_second": round(seen.events / seconds, 1),
            "remaining_events": remaining,
            "remaining_attempts": remaining_attempts,
            "correct": (remaining, remaining_attempts) == (expected_left, expected_left)
            if finished
            else None,
            "statement_parts_ms": parts,
            "python": platform.python_version(),
        }
        if report is not None:
            t = report.timings
            result["timings"] = t.to_dict()
            if t.batches:
                result["per_batch_ms"] = {
                    "find": round(1000 * t.find / t.batches, 1),
                    "delete_attempts": round(1000 * t.delete_attempts / t.batches, 1),
                    "delete_events": round(1000 * t.delete_events / t.batches, 1),
                }
        return result
    finally:
        if not args.keep:
            await mongo.drop_database(db.name)
        await mongo.close()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mongo-url", default="mongodb://127.0.0.1:27029/hookbay_bench_retention")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--owners-per-plan", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the run")
    parser.add_argument(
        "--no-anatomy",
        dest="anatomy",
        action="store_false",
        help="skip timing a statement's parts before the run",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument(
        "--no-write", dest="write", action="store_false", help="do not update docs/benchmarks.md"
    )
    return parser.parse_args()


BEGIN = (
    "<!-- bench:retention:begin (generated by scripts/bench_retention.py; "
    "edits inside are overwritten) -->"
)
END = "<!-- bench:retention:end -->"
DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
TARGET_PER_SECOND = 20_000


def render(result: dict[str, Any], command: str) -> str:
    """The doc block for one run's ``result``."""
    per_batch = result.get("per_batch_ms", {})
    rate = result["events_per_second"]
    state = "complete, result checked" if result["finished"] else "stopped at the time budget"
    if result["finished"] and not result["correct"]:
        state = "complete, **result wrong**"
    lines = [
        BEGIN,
        "",
        f"Run: {utcnow():%Y-%m-%d %H:%M} UTC, `{command}`; Python {result['python']}, "
        "FerretDB v1.24.0 (PostgreSQL backend); 2 cores, shared.",
        "",
        "| events stored | expired | batch | run | deleted events / attempts | seconds "
        "| events/s | per batch: find / delete attempts / delete events (ms) |",
        "|---:|---:|---:|---|---:|---:|---:|---|",
        f"| {result['events_loaded']:,} | {result['expired']:,} | {result['batch_size']:,} "
        f"| {state} | {result['events_deleted']:,} / {result['attempts_deleted']:,} "
        f"| {result['run_seconds']:,} | {rate:,} | {per_batch.get('find', '-')} / "
        f"{per_batch.get('delete_attempts', '-')} / {per_batch.get('delete_events', '-')} |",
        "",
        f"One statement's parts before the run (ms): {result['statement_parts_ms'] or 'not timed'}.",
        "",
        f"Target ≥ {TARGET_PER_SECOND:,} events/s: "
        f"{'**met**' if rate >= TARGET_PER_SECOND else '**missed**'}.",
        "",
        END,
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    configure_logging("WARNING", service="bench-retention")
    arguments = parse()
    outcome = asyncio.run(main(arguments))
    print(json.dumps(outcome, indent=2))
    if arguments.write:
        command = "scripts/bench_retention.py " + " ".join(sys.argv[1:])
        write_doc_block(DOC, BEGIN, END, "## Retention", render(outcome, command.strip()))
        print(f"bench: wrote {DOC}")

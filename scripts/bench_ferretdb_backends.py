#!/usr/bin/env python3
"""Benchmark a FerretDB (or any MongoDB-wire) endpoint with hookbay-shaped webhook events.

Loads N synthetic captured-event documents into a fresh collection, builds the
hookbay indexes, then times the list/lookup/count/update queries hookbay issues.
Run it once per backend (e.g. FerretDB-sqlite and FerretDB-postgresql) and compare.

    python scripts/bench_ferretdb_backends.py --mongo-url mongodb://127.0.0.1:27031/ --events 100000

Requires: pymongo (tested with 4.20.0). Data is deterministic for a given --seed.
The target database is DROPPED at start (default: hookbay_bench).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import string
import sys
import time
from collections.abc import Callable
from typing import Any

from pymongo import ASCENDING, DESCENDING, MongoClient
from pymongo.errors import BulkWriteError

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
N_WEBHOOKS = 20
TARGET_SHARE = 0.10  # share of events owned by the target webhook
USERNAMES = ["alice", "bob", "carol", "dave", "erin"]
STATUSES = ["success", "failed", "pending"]
STATUS_WEIGHTS = [0.80, 0.15, 0.05]
CONTENT_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "application/x-www-form-urlencoded",
]
SORT = [("created_at", DESCENDING), ("_id", DESCENDING)]
PAGE = 50


def ulidish(ms: int, rng: random.Random) -> str:
    """26-char ULID-like id: 10 chars of ms timestamp + 16 random chars (time sortable)."""
    t = "".join(CROCKFORD[(ms >> (5 * i)) & 31] for i in range(9, -1, -1))
    return t + "".join(rng.choice(CROCKFORD) for _ in range(16))


def make_events(n: int, seed: int, headers_format: str = "objects"):
    rng = random.Random(seed)
    webhooks = [f"wh_{ulidish(1_700_000_000_000 + i, rng)}" for i in range(N_WEBHOOKS)]
    target = webhooks[0]
    # target holds ~10%; the other 19 share the rest with a mild skew
    other_w = [1.0 / (i + 1) ** 0.5 for i in range(N_WEBHOOKS - 1)]
    scale = (1 - TARGET_SHARE) / sum(other_w)
    weights = [TARGET_SHARE] + [w * scale for w in other_w]
    base = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    ms = int(base.timestamp() * 1000)
    words = ["order", "invoice", "customer", "payment", "refund", "item", "amount", "sku"]
    header_names = [
        "User-Agent",
        "Accept",
        "Accept-Encoding",
        "X-Request-Id",
        "X-Forwarded-For",
        "X-Forwarded-Proto",
        "X-Signature",
        "X-Event-Type",
        "X-Delivery",
        "Content-Length",
        "Connection",
        "Host",
    ]
    for _ in range(n):
        ms += rng.randint(1, 2000)
        created = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
        req_id = "req_" + ulidish(ms, rng)
        body = {
            "id": req_id,
            "type": rng.choice(words) + "." + rng.choice(["created", "updated"]),
            "data": {
                f"{rng.choice(words)}_{k}": "".join(rng.choices(string.ascii_letters, k=40))
                for k in range(18)
            },
        }
        body_s = json.dumps(body)
        yield (
            {
                "_id": "evt_" + ulidish(ms, rng),
                "request_id": req_id,
                "webhook_id": rng.choices(webhooks, weights)[0],
                "username": rng.choice(USERNAMES),
                "status": rng.choices(STATUSES, STATUS_WEIGHTS)[0],
                "created_at": created.replace(tzinfo=None),
                "client_ip": f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                "content_type": rng.choice(CONTENT_TYPES),
                "request_headers": [
                    [h, v] if headers_format == "pairs" else {"name": h, "value": v}
                    for h, v in (
                        (h, "".join(rng.choices(string.ascii_lowercase, k=16)))
                        for h in header_names
                    )
                ],
                "request_body": body_s,
                "request_body_encoding": "utf8",
                "signature_valid": None,
            },
            target,
        )


def pct(sorted_vals: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    k = max(0, min(len(sorted_vals) - 1, round(p / 100 * len(sorted_vals) + 0.5) - 1))
    return sorted_vals[k]


def timeit(fn: Callable[[int], Any], iterations: int, warmup: int, budget_s: float) -> dict:
    """Run `warmup` untimed then `iterations` timed calls; both loops also stop once
    `budget_s` wall seconds are spent (warm-up gets at most 10% of it), so slow
    backends finish in bounded time. `n` reports how many samples were taken."""
    t_start = time.perf_counter()
    for i in range(warmup):
        fn(i)
        if time.perf_counter() - t_start > budget_s * 0.1:
            break
    t_start = time.perf_counter()
    samples = []
    for i in range(iterations):
        t0 = time.perf_counter()
        fn(warmup + i)
        samples.append((time.perf_counter() - t0) * 1000)
        if time.perf_counter() - t_start > budget_s:
            break
    s = sorted(samples)
    return {
        "n": len(s),
        "p50": pct(s, 50),
        "p95": pct(s, 95),
        "p99": pct(s, 99),
        "mean": sum(s) / len(s),
        "max": s[-1],
    }


def explain_find(db, coll: str, flt: dict, sort: list, limit: int) -> dict:
    try:
        r = db.command(
            "explain",
            {"find": coll, "filter": flt, "sort": dict(sort), "limit": limit},
            verbosity="queryPlanner",
        )
    except Exception as e:
        return {"error": str(e)}
    return {k: r.get(k) for k in ("filterPushdown", "sortPushdown", "limitPushdown")} | {
        "plan": r.get("queryPlanner")
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mongo-url", required=True)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--db", default="hookbay_bench")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument(
        "--budget",
        type=float,
        default=180.0,
        help="max wall seconds per query's timed loop (default 180); n < iterations if hit",
    )
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--label", default="")
    ap.add_argument("--json-out", help="write results as JSON to this file")
    ap.add_argument(
        "--du-path",
        help="local directory whose on-disk size to report after the load "
        "(e.g. the FerretDB --sqlite-url directory or a PostgreSQL data dir)",
    )
    ap.add_argument("--show-plans", action="store_true", help="print full explain plans")
    ap.add_argument(
        "--headers-format",
        choices=["objects", "pairs"],
        default="objects",
        help="request_headers as [{name, value}] (default) or [[name, value]] pairs; "
        "FerretDB v1 rejects nested arrays, so 'pairs' fails there",
    )
    a = ap.parse_args()
    if a.events < 1 or a.iterations < 1 or a.batch < 1:
        ap.error("--events, --iterations and --batch must be >= 1")

    client = MongoClient(a.mongo_url, serverSelectionTimeoutMS=5000, socketTimeoutMS=600_000)
    info = client.admin.command("buildInfo")
    label = a.label or a.mongo_url
    print(
        f"# {label}: server {info.get('version')} ferretdb {info.get('ferretdbVersion', '-')}",
        flush=True,
    )
    client.drop_database(a.db)
    db = client[a.db]
    # compatibility probe: which document shapes does this server accept?
    probe = db["_probe"]
    for what, doc in [
        ("nested arrays [[name, value]]", {"h": [["X-A", "1"]]}),
        ("array of {name, value}", {"h": [{"name": "X-A", "value": "1"}]}),
        ("key containing '.'", {"h": {"X.A": "1"}}),
        ("key starting with '$'", {"h": {"$a": "1"}}),
    ]:
        try:
            probe.insert_one(doc)
            print(f"probe {what}: accepted")
        except Exception as e:
            print(f"probe {what}: REJECTED ({str(e).split(', full error')[0][-90:]})")
    probe.drop()
    coll = db["events"]
    coll.create_index([("request_id", ASCENDING)], unique=True, name="request_id_1")
    coll.create_index([("webhook_id", ASCENDING), ("created_at", DESCENDING)], name="wh_created")
    coll.create_index(
        [("webhook_id", ASCENDING), ("status", ASCENDING), ("created_at", DESCENDING)],
        name="wh_status_created",
    )
    coll.create_index([("username", ASCENDING), ("created_at", DESCENDING)], name="user_created")

    # ---- load ---------------------------------------------------------------
    ids, req_ids, target_times = [], [], []
    batch: list[dict] = []
    target = None
    insert_s = 0.0
    t_load0 = time.perf_counter()
    for doc, target in make_events(a.events, a.seed, a.headers_format):
        ids.append(doc["_id"])
        req_ids.append(doc["request_id"])
        if doc["webhook_id"] == target:
            target_times.append(doc["created_at"])
        batch.append(doc)
        if len(batch) == a.batch:
            t0 = time.perf_counter()
            coll.insert_many(batch, ordered=False)
            insert_s += time.perf_counter() - t0
            batch = []
    if batch:
        t0 = time.perf_counter()
        coll.insert_many(batch, ordered=False)
        insert_s += time.perf_counter() - t0
    wall_s = time.perf_counter() - t_load0
    total = coll.estimated_document_count()
    print(
        f"loaded {total} docs: insert time {insert_s:.1f}s -> {a.events / insert_s:.0f} docs/s "
        f"(wall incl. generation {wall_s:.1f}s); target webhook docs: {len(target_times)}",
        flush=True,
    )
    stats = db.command("dbStats")
    size = {k: stats.get(k) for k in ("dataSize", "storageSize", "indexSize", "totalSize")}
    print(f"dbStats: {size}", flush=True)
    if a.du_path:
        size["du_bytes"] = sum(
            os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(a.du_path)
            for f in fs
            if os.path.isfile(os.path.join(d, f))
        )
        print(f"on-disk size of {a.du_path}: {size['du_bytes'] / 2**20:.1f} MiB", flush=True)

    rng = random.Random(a.seed + 1)
    mid_t = target_times[len(target_times) // 2]
    q = {
        "Q1 list newest 50": lambda i: list(
            coll.find({"webhook_id": target}).sort(SORT).limit(PAGE)
        ),
        "Q2 list failed 50": lambda i: list(
            coll.find({"webhook_id": target, "status": "failed"}).sort(SORT).limit(PAGE)
        ),
        "Q3 cursor page 50": lambda i: list(
            coll.find({"webhook_id": target, "created_at": {"$lt": mid_t}}).sort(SORT).limit(PAGE)
        ),
        "Q4 find_one request_id": lambda i: coll.find_one({"request_id": rng.choice(req_ids)}),
        "Q5 count failed": lambda i: coll.count_documents(
            {"webhook_id": target, "status": "failed"}
        ),
        "Q6 update_one by _id": lambda i: coll.update_one(
            {"_id": rng.choice(ids)}, {"$set": {"status": STATUSES[i % 2]}}
        ),
        # extra: single-key sort, to show the effect of FerretDB sort pushdown
        "Q1s list newest 50 (sort created_at only)": lambda i: list(
            coll.find({"webhook_id": target}).sort("created_at", DESCENDING).limit(PAGE)
        ),
    }

    # sanity checks before timing (explicit, so they also run under python -O)
    r1 = q["Q1 list newest 50"](0)
    if not (
        len(r1) == min(PAGE, len(target_times))
        and r1[0]["created_at"] == target_times[-1]
        and all(r1[k]["created_at"] >= r1[k + 1]["created_at"] for k in range(len(r1) - 1))
    ):
        sys.exit("sanity check failed: Q1 did not return the newest events in order")
    r3 = q["Q3 cursor page 50"](0)
    if not (
        len(r3) == min(PAGE, len(target_times) // 2) and all(d["created_at"] < mid_t for d in r3)
    ):
        sys.exit("sanity check failed: Q3 cursor page is wrong")

    explains = {
        "Q1": explain_find(db, "events", {"webhook_id": target}, SORT, PAGE),
        "Q1s": explain_find(db, "events", {"webhook_id": target}, [("created_at", -1)], PAGE),
        "Q3": explain_find(
            db, "events", {"webhook_id": target, "created_at": {"$lt": mid_t}}, SORT, PAGE
        ),
    }
    for k, e in explains.items():
        short = {
            x: e.get(x)
            for x in ("filterPushdown", "sortPushdown", "limitPushdown", "error")
            if x in e
        }
        print(f"explain {k}: {short}")
        if a.show_plans:
            print(json.dumps(e.get("plan"), default=str, indent=1))

    results = {}
    print("\n| query | n | p50 ms | p95 ms | p99 ms | mean ms |\n|---|---|---|---|---|---|")
    for name, fn in q.items():
        r = timeit(fn, a.iterations, a.warmup, a.budget)
        results[name] = r
        print(
            f"| {name} | {r['n']} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} | {r['mean']:.2f} |",
            flush=True,
        )

    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(
                {
                    "label": label,
                    "events": a.events,
                    "insert_docs_per_s": a.events / insert_s,
                    "insert_s": insert_s,
                    "target_docs": len(target_times),
                    "dbStats": size,
                    "explain": {
                        k: {x: v for x, v in e.items() if x != "plan"} for k, e in explains.items()
                    },
                    "latency_ms": results,
                },
                f,
                indent=1,
                default=str,
            )
    client.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BulkWriteError as e:
        errs = e.details.get("writeErrors", [])
        msg = errs[0].get("errmsg", "")[-200:] if errs else str(e)[:200]
        sys.exit(f"insert failed ({len(errs)} write errors in batch): ...{msg}")

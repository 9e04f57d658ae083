#!/usr/bin/env python3
"""Recorder throughput: events and attempts written to the MongoDB-wire server per second.

    .venv/bin/python scripts/bench_recorder.py [EVENTS]

Pre-produces EVENTS events (1 KB JSON bodies) and one 200 attempt per event to a fresh Kafka
namespace, then starts one recorder process (``python -m hookbay_forwarder recorder``) on a
fresh database and times from its start until every event is stored with status ``success``.
Needs the dev infrastructure (``make infra-up``); prints the figures (docs/benchmarks.md has
them with the date and machine).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

from benchlib import free_port, make_body
from pymongo import AsyncMongoClient

from hookbay_common.clock import utcnow
from hookbay_common.ids import IdPrefix, derived_id, new_id
from hookbay_common.kafka import create_producer, ensure_topics
from hookbay_common.models import Attempt, AttemptTrigger, Event
from hookbay_common.topics import Topics
from hookbay_common.wire import encode_attempt, encode_event
from hookbay_dev.processes import launch

ROOT = Path(__file__).resolve().parent.parent
KAFKA = os.environ.get("HOOKBAY_BENCH_KAFKA", "127.0.0.1:9092")
MONGO = os.environ.get("HOOKBAY_BENCH_MONGO", "mongodb://127.0.0.1:27017")


def records(count: int) -> list[tuple[Event, Attempt]]:
    pairs = []
    body = make_body()
    for i in range(count):
        event = Event(
            id=new_id(IdPrefix.EVENT), request_id=new_id(IdPrefix.REQUEST),
            webhook_id="wh_bench", username=f"owner{i % 50}", webhook_name="hook",
            client_ip="127.0.0.1", request_headers={"content-type": "application/json"},
            body=body, content_type="application/json", forward_url="http://127.0.0.1:9/x",
            created_at=utcnow(),
        )  # fmt: skip
        attempt = Attempt(
            id=new_id(IdPrefix.ATTEMPT), event_id=event.id, username=event.username,
            webhook_id=event.webhook_id, chain_id=derived_id(IdPrefix.CHAIN, event.id), number=1,
            trigger=AttemptTrigger.INITIAL, url="http://127.0.0.1:9/x", started_at=utcnow(),
            status_code=200, latency_ms=1.0,
        )  # fmt: skip
        pairs.append((event, attempt))
    return pairs


async def main(count: int) -> None:
    namespace = f"bench.recorder.{uuid.uuid4().hex[:8]}"
    database = f"hookbay_bench_recorder_{uuid.uuid4().hex[:8]}"
    names = Topics(namespace)
    await ensure_topics(KAFKA, partitions=6, specs=names.specs())
    producer = create_producer(KAFKA)
    await producer.start()
    try:
        for event, attempt in records(count):
            await producer.send(names.events, encode_event(event), key=event.username.encode())
            await producer.send(names.attempts, encode_attempt(attempt), key=event.id.encode())
        await producer.flush()
    finally:
        await producer.stop()
    env = {
        **os.environ, "HOOKBAY_KAFKA_NAMESPACE": namespace, "HOOKBAY_KAFKA_BOOTSTRAP": KAFKA,
        "HOOKBAY_MONGO_URL": f"{MONGO}/{database}", "HOOKBAY_LOG_LEVEL": "WARNING",
        "HOOKBAY_SECRET_KEY": "bench-only-secret-key-0123456789abcdef",
        "HOOKBAY_RECORDER_METRICS_PORT": str(free_port()), "HOOKBAY_OPS_HOST": "127.0.0.1",
    }  # fmt: skip
    mongo: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(MONGO)
    events = mongo[database]["events"]
    started = time.monotonic()
    proc = launch([sys.executable, "-m", "hookbay_forwarder", "recorder"], env, None)
    try:
        first = None
        while (done := await events.count_documents({"status": "success"})) < count:
            if done and first is None:
                first = time.monotonic()
            if time.monotonic() - started > 600:
                raise SystemExit(f"only {done} of {count} recorded after 600 s")
            await asyncio.sleep(0.5)
        elapsed = time.monotonic() - started
        print(f"recorder: {count:,} events + {count:,} attempts recorded in {elapsed:.1f} s "
              f"from process start: {count / elapsed:,.0f} events/s "
              f"({count / (time.monotonic() - (first or started)):,.0f}/s after the first write)")  # fmt: skip
    finally:
        proc.stop(grace=30)
        await mongo.drop_database(database)
        await mongo.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000))

"""deploy/local/infra.sh: idempotent, clear about conflicts, and a broker formatted correctly."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INFRA = ROOT / "deploy" / "local" / "infra.sh"
RUN_DIR = Path(os.environ.get("HOOKBAY_INFRA_RUN", ROOT / ".cache" / "run"))


def infra(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INFRA), *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=120
    )


class TestInfra:
    def test_up_when_running_is_a_quick_no_op(self) -> None:
        started = time.monotonic()
        result = infra("up")
        assert result.returncode == 0, result.stderr
        assert "kafka already running" in result.stderr
        assert "ferretdb already running" in result.stderr
        assert "redis already running" in result.stderr
        if os.environ.get("HOOKBAY_FERRETDB_BACKEND", "postgresql") == "postgresql":
            assert "postgres already running" in result.stderr
        assert time.monotonic() - started < 10

    def test_status(self) -> None:
        lines = infra("status").stdout.splitlines()
        backend = os.environ.get("HOOKBAY_FERRETDB_BACKEND", "postgresql")
        names = ["kafka", "ferretdb", "redis"] + (["postgres"] if backend == "postgresql" else [])
        assert len(lines) == len(names)
        for name in names:
            assert any(re.fullmatch(rf"{name}: running \(pid \d+\)", line) for line in lines), lines

    def test_port_taken_by_someone_else(self, tmp_path: Path) -> None:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", 0))
            squatter.listen()
            port = squatter.getsockname()[1]
            result = infra(
                "up", HOOKBAY_INFRA_RUN=str(tmp_path), HOOKBAY_INFRA_KAFKA_PORT=str(port)
            )
        assert result.returncode == 1
        assert f"port {port} (for kafka) is taken by another process" in result.stderr
        assert not list(tmp_path.glob("*.pid"))

    def test_down_without_anything_started_is_harmless(self, tmp_path: Path) -> None:
        result = infra("down", HOOKBAY_INFRA_RUN=str(tmp_path))
        assert result.returncode == 0

    def test_broker_cluster_id_is_a_clean_uuid(self) -> None:
        meta = (RUN_DIR / "kafka" / "data" / "meta.properties").read_text()
        cluster_id = re.search(r"^cluster\.id=(.*)$", meta, re.MULTILINE)
        assert cluster_id is not None
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id.group(1)), cluster_id.group(1)


def psql(sql: str) -> str:
    """A query on the embedded store's PostgreSQL (the `ferretdb` database), as its owner."""
    port = os.environ.get("HOOKBAY_INFRA_PG_PORT", "5433")
    done = subprocess.run(
        ["runuser", "-u", "hookbay-pg", "--", "psql", "-h", "127.0.0.1", "-p", port,
         "-U", "hookbay", "-d", "ferretdb", "-tAc", sql],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip()


class TestEmbeddedStoreIndexes:
    """deploy/local/ferretdb/indexes.sql: every collection FerretDB creates is GIN-indexed on the
    fields hookbay filters by equality, also after a drop, and an equality look-up uses it."""

    def gin_indexes(self, schema: str) -> set[str]:
        rows = psql(
            f"SELECT indexname FROM pg_indexes WHERE schemaname = '{schema}'"  # noqa: S608
            " AND indexname LIKE '%\\_gin\\_%'"
        )
        return {re.sub(r"_[0-9a-f]{8}_gin_", ".", row) for row in rows.splitlines()}

    def with_pending_list(self, schema: str) -> set[str]:
        """GIN indexes of ``schema`` that keep a pending list (fastupdate not off)."""
        rows = psql(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"  # noqa: S608
            f" JOIN pg_am a ON a.oid = c.relam WHERE n.nspname = '{schema}' AND a.amname = 'gin'"
            " AND NOT coalesce('fastupdate=off' = ANY (c.reloptions), false)"
        )
        return set(rows.split())

    def test_an_index_with_a_pending_list_loses_it(self, mongo_url: str) -> None:
        """An index made before the step turned pending lists off is changed by the next run."""
        from pymongo import MongoClient

        name = f"ginfu_{os.getpid()}_{int(time.time() * 1000) % 10**8}"
        with MongoClient[dict[str, Any]](mongo_url.rsplit("/", 1)[0]) as client:
            try:
                client[name].events.insert_one({"_id": "evt_1", "request_id": "req_1"})
                (index,) = [i for i in psql(
                    f"SELECT indexname FROM pg_indexes WHERE schemaname = '{name}'"  # noqa: S608
                    " AND indexname LIKE '%\\_gin\\_request\\_id'"
                ).split()]  # fmt: skip
                psql(f'ALTER INDEX "{name}"."{index}" SET (fastupdate = on)')
                assert self.with_pending_list(name) == {index}
                result = infra("up", "postgres")
                assert result.returncode == 0, result.stderr
                assert self.with_pending_list(name) == set()
            finally:
                client.drop_database(name)

    def test_new_and_recreated_collections_are_indexed(self, mongo_url: str) -> None:
        from pymongo import MongoClient

        name = f"gin_{os.getpid()}_{int(time.time() * 1000) % 10**8}"
        with MongoClient[dict[str, Any]](mongo_url.rsplit("/", 1)[0]) as client:
            db = client[name]
            try:
                db.events.insert_one({"_id": "evt_1", "request_id": "req_1"})
                db.attempts.insert_one({"_id": "att_1", "event_id": "evt_1"})
                db.event_pages.insert_one({"_id": "wh_1:0", "webhook_id": "wh_1"})
                db.event_books.insert_one({"_id": "wh_1:000000", "webhook_id": "wh_1"})
                db.destinations.insert_one({"_id": "dst_1", "username": "u", "name": "d"})
                expected = {
                    "events.id", "events.request_id", "events.username", "events.webhook_id_page",
                    "attempts.id", "attempts.event_id", "attempts.username",
                    "attempts.webhook_id_event_page", "event_pages.id", "event_pages.username",
                    "event_pages.webhook_id", "event_books.id", "event_books.username",
                    "event_books.webhook_id", "destinations.id", "destinations.username",
                }  # fmt: skip
                assert self.gin_indexes(name) == expected
                assert self.with_pending_list(name) == set()
                db.events.drop()
                db.events.insert_one({"_id": "evt_2", "request_id": "req_2"})
                assert self.gin_indexes(name) == expected

                def scans(index: str) -> int:
                    return int(
                        psql(
                            "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes"  # noqa: S608
                            f" WHERE schemaname = '{name}' AND indexrelname LIKE"
                            f" 'events\\_%\\_gin\\_{index}'"
                        )
                    )

                db.events.insert_one(
                    {"_id": "evt_3", "request_id": "r3", "webhook_id": "w", "page": 4}
                )
                for index, query in [
                    ("request\\_id", {"request_id": "req_2"}),
                    ("webhook\\_id\\_page", {"webhook_id": "w", "page": 4}),  # a list page
                ]:
                    before = scans(index)
                    assert db.events.find_one(query) is not None
                    # Statistics reach the view asynchronously: PostgreSQL 15 defers an idle
                    # backend's flush by PGSTAT_IDLE_INTERVAL (10 s) when it flushed less than
                    # 1 s before, so a 10 s deadline raced it (seen in CI).
                    deadline = time.monotonic() + 30
                    while scans(index) == before:
                        assert time.monotonic() < deadline, f"{query} did not use the GIN index"
                        time.sleep(0.1)
            finally:
                client.drop_database(name)

    def test_the_step_is_idempotent(self) -> None:
        result = infra("up", "postgres")
        assert result.returncode == 0, result.stderr
        assert (
            psql("SELECT count(*) FROM pg_event_trigger WHERE evtname = 'hookbay_gin_on_create'")
            == "1"
        )

"""The quick version of the chaos suite's fuzzing, in ``make test``: 300 inputs each to the real
``python -m hookbay_ingest`` and ``python -m hookbay_dashboard`` processes (real Kafka, FerretDB
and Redis; a real forwarder and destination behind ingest), run by ``tests.chaos.fuzzing`` as
``make chaos`` runs its 10,000: no 5xx, every error body JSON, no stack trace or secret in an
answer or a log line, every input answered 200 delivered to the destination and in Kafka
with the body sent. Seed 0: the same generated inputs every run. And the leak scanner itself,
proven on planted secrets and stack traces."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hookbay_common.db import Database
from tests.chaos.fuzzing import FuzzStack, fuzz_stack, not_delivered, run_fuzzing
from tests.chaos.leaks import scan, scan_logs

INGEST_INPUTS = 300
API_INPUTS = 300


@pytest.fixture
async def stack(env: dict[str, str], db: Database, tmp_path: Path) -> AsyncIterator[FuzzStack]:
    namespace = f"fuzz.{uuid.uuid4().hex[:8]}"  # a topic of its own: the Kafka check reads it all
    async with fuzz_stack({**env, "HOOKBAY_KAFKA_NAMESPACE": namespace}, db, tmp_path) as fs:
        yield fs


def _clean(report: dict[str, Any]) -> dict[str, Any]:
    """What a failed assertion shows: the report without its long lists."""
    return {k: v for k, v in report.items() if k not in {"by_kind", "by_operation"}}


class TestFuzzing:
    """One test (xdist spreads tests over workers: two would start two stacks), both surfaces
    fuzzed by ``run_fuzzing`` as ``make chaos`` fuzzes them."""

    async def test_hostile_inputs_get_documented_json_answers_no_leaks_and_200s_in_kafka(
        self, stack: FuzzStack
    ) -> None:
        fuzzed = await run_fuzzing(stack, n_ingest=INGEST_INPUTS, n_api=API_INPUTS, seed=0)

        ingest = fuzzed["ingest"]
        assert ingest["inputs"] == INGEST_INPUTS
        assert ingest["5xx"] == 0, _clean(ingest)
        assert ingest["non_json_errors"] == 0, _clean(ingest)
        assert ingest["offending"] == 0, _clean(ingest)
        assert ingest["by_status"].get("200", 0) > INGEST_INPUTS // 5, ingest["by_status"]
        assert ingest["accepted"] + ingest["handshakes"] == ingest["by_status"]["200"]
        assert ingest["answers"] >= INGEST_INPUTS
        assert ingest["missing_from_kafka"] == []
        assert ingest["not_delivered"] == []  # every 200 reached the destination, byte-exact
        # among them: whitespace around values beside a value that is not UTF-8
        assert ingest["accepted_variants"].get("ows_beside_latin1", 0) > 0, ingest[
            "accepted_variants"
        ]
        assert ingest["leaks"] == []  # in the answers and in ingest's log
        assert ingest["exited"] is None
        api = fuzzed["api"]
        assert api["inputs"] >= API_INPUTS
        assert api["5xx"] == 0, _clean(api)
        assert api["non_json_errors"] == 0, _clean(api)
        assert api["offending"] == 0, _clean(api)
        assert api["by_phase"]["stateful"] > 0, api["by_phase"]
        assert {"200", "201", "204", "401", "404", "422"} <= set(api["by_status"])
        assert api["answers"] >= API_INPUTS
        assert api["leaks"] == []  # in the answers and in the dashboard's log
        assert api["exited"] is None
        assert fuzzed["ok"]


class TestLeakScan:
    SECRET = "whsec-0123456789abcdef"
    TOKEN = "hbk_Zc4ptAcD3Y5iGNIwp1gXfqsnP_CZio1IyDrHWXYy8RU"

    def test_finds_planted_secrets_as_sent_json_escaped_and_percent_encoded(self) -> None:
        quoted = 'pass"word\\with-quotes'
        texts = [
            ("header", f"HTTP/1.1 200 OK\nset-cookie: x={self.TOKEN}\n"),
            ("body", json.dumps({"echo": f"secret is {self.SECRET}"})),
            ("log", json.dumps({"event": "login", "password": quoted})),
            ("url", "location: /cb?token=whsec-0123456789abcdef&x=%22"),
            ("encoded", "next=pass%22word%5Cwith-quotes"),
        ]

        findings = scan(texts, [self.SECRET, self.TOKEN, quoted])

        assert [f.split(":")[0] for f in findings] == ["header", "body", "log", "url", "encoded"]
        assert all("secret" in f for f in findings)
        assert not any(s in f for f in findings for s in (self.SECRET, self.TOKEN, quoted))

    def test_finds_stack_traces_plain_and_inside_json_log_lines(self) -> None:
        trace = (
            "Traceback (most recent call last):\n"
            '  File "/app/hookbay_ingest/app.py", line 12, in receive\n'
            "ValueError: boom"
        )
        texts = [
            ("plain", trace),
            ("json-log", json.dumps({"event": "request_crashed", "exception": trace})),
            ("frame-only", json.dumps({"exc": '  File "/x/y.py", line 3, in f'})),
        ]

        findings = scan(texts, [])

        assert [f.split(":")[0] for f in findings] == ["plain", "json-log", "frame-only"]
        assert all("stack trace" in f for f in findings)

    def test_clean_text_and_short_secrets_give_nothing(self) -> None:
        texts = [
            ("ok", '{"success":true,"requestId":"req_01m86rcwgbww6z2g5m5ssxkrpe"}'),
            ("error", '{"error":"Invalid signature","message":"Signature verification failed"}'),
            ("log", '{"event": "client_disconnected", "level": "info", "file": "app.py"}'),
            ("words", "a traceback is mentioned; File a report, line up"),
        ]

        assert scan(texts, [self.SECRET, self.TOKEN, "short", ""]) == []
        assert scan([("short", "the word short appears")], ["short"]) == []

    def test_scan_logs_names_file_and_line_and_a_missing_file(self, tmp_path: Path) -> None:
        log = tmp_path / "ingest.log"
        log.write_text(f'{{"event": "a"}}\n{{"event": "b", "token": "{self.TOKEN}"}}\n')

        findings = scan_logs([log, tmp_path / "absent.log"], [self.TOKEN])

        assert findings[0].startswith("ingest.log:2: secret hbk...")
        assert findings[1].endswith("absent.log: no such log file")
        assert len(findings) == 2


class TestDeliveryCheck:
    """``not_delivered`` on a planted destination log: the checker behind "every 200 reached the
    destination" finds what is missing, what failed and what arrived with other bytes."""

    async def test_names_the_missing_the_failed_and_the_altered(self, tmp_path: Path) -> None:
        log = tmp_path / "deliveries.jsonl"
        lines = [
            {"request_id": "req_a", "status": 200, "sha256": "aa"},
            {"request_id": "req_b", "status": 503, "sha256": "bb"},
            {"request_id": "req_c", "status": 200, "sha256": "xx"},
            {"request_id": "req_d", "status": 200, "sha256": "dd"},
        ]
        log.write_text(
            "".join(json.dumps(line) + "\n" for line in lines) + '{"request_id": "req_e"'
        )
        accepted = [
            {"request_id": rid, "index": n, "kind": "valid", "sha256": sha}
            for n, (rid, sha) in enumerate(
                [
                    ("req_a", "aa"),
                    ("req_b", "bb"),
                    ("req_c", "cc"),
                    ("req_d", None),
                    ("req_e", "ee"),
                ]
            )
        ]

        problems = await not_delivered(log, accepted, timeout=0.2)

        assert problems == [
            "req_b (input 1, valid): answered 200, not delivered within 0.2 s",
            "req_c (input 2, valid): delivered with another body than the one sent",
            "req_e (input 4, valid): answered 200, not delivered within 0.2 s",
        ]

    async def test_nothing_when_every_one_arrived(self, tmp_path: Path) -> None:
        log = tmp_path / "deliveries.jsonl"
        log.write_text(json.dumps({"request_id": "req_a", "status": 200, "sha256": "aa"}) + "\n")
        accepted = [{"request_id": "req_a", "index": 0, "kind": "valid", "sha256": "aa"}]

        assert await not_delivered(log, accepted, timeout=5) == []

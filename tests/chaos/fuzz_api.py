"""Fuzzing of the dashboard API: schemathesis over its served OpenAPI document, with a
bearer token, valid and invalid data, one operation at a time and as stateful sequences.

``fuzz_api(base, token, n, seed)`` sends at least ``n`` generated requests:

1. **Per operation** (about 80 %): every operation in turn, half the examples positive (as the
   document describes), half negative (breaking it: wrong types, missing fields, bad formats),
   and a third of them with the path parameters pinned to what the caller owns (a webhook, an
   event, a destination, a route), so that valid requests get past the 404 of a random name. One request in 16 goes with
   a wrong token or none (the 401 path).
2. **Stateful** (the rest): schemathesis' state machine over the links it infers from the
   document (``POST /webhooks`` → ``GET|PATCH|DELETE /webhooks/{name}``, ``GET /webhooks`` →
   the webhook's events, stats, replays, a listed event → its detail, export and replay,
   ``POST /tokens`` → ``DELETE /tokens/{id}``, ``POST /admin/users`` → ``PATCH|DELETE``).

Every response is checked with schemathesis' ``not_a_server_error``, ``status_code_conformance``,
``content_type_conformance``, ``response_schema_conformance`` and ``negative_data_rejection``, and
each 4xx/5xx body must be a JSON object with string ``error`` and ``message``. Secrets the run
has the API store or receives (webhook secrets, passwords and destination header values of
accepted requests, issued tokens) are collected and no response may carry one, except the answer that issued a token; the
caller's token too (``leaks``; the logs are the caller's to scan with ``secrets_seen``).

What the run may touch (it acts as the token's owner, and an admin token could reach any user):

- ``DELETE|PATCH /admin/users/{username}`` go through only for users this run created; any
  other name that could exist is replaced by one that cannot (``fzgone...``), so no other
  owner's account, nor the token's own, is changed or deleted (an admin cannot delete itself
  anyway: 400).
- ``DELETE /tokens/{token_id}`` goes through only for tokens this run created; the token in use
  is never revoked, so the run cannot lock itself out.
- every ``forward_url``, and every destination's ``url``, sent is pointed at ``127.0.0.1:9``
  (keeping scheme, credentials and path): with private destinations allowed, a fuzzed host would
  make the forwarder (and with them refused, the SSRF check's DNS look-up) reach beyond the
  machine.
- ``GET /webhooks/{name}/events/stream`` (a live tail that never ends) is read for at most
  ``STREAM_SECONDS`` and gets a few examples only.
- the token's own webhooks may be changed, deactivated or deleted: give the run a user of its
  own (the CLI's ``--token-file``), never one whose webhooks other tests rely on.
- at the end, the users and tokens the run created are deleted (``cleaned_up``).

Run by ``tests/chaos/fuzzing.py`` (``make chaos --fuzz N``, and a short run in ``make test``).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import random
import time
import uuid
import zlib
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import hypothesis
import requests
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.transport import Response
from schemathesis.openapi.checks import UndefinedStatusCode
from schemathesis.specs.openapi.checks import negative_data_rejection

from hookbay_common.names import is_valid_username
from tests.chaos.fuzz_ingest import (
    Case,
    Req,
    Tally,
    exchange,
    judge,
)
from tests.chaos.fuzz_ingest import Report as IngestReport
from tests.chaos.leaks import MIN_SECRET_LENGTH, redact, scan

ApiCase = schemathesis.Case[Any]

API = "/api/v1"
MAX_EXAMPLES = 20
STATEFUL_SHARE = 0.2
PROTOCOL_SHARE = 0.03
STREAM_SECONDS = 1.0
TIMEOUT = 30.0
WRONG_AUTH_EVERY = 16
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
SECRET_FIELDS = ("secret", "password")
"""Body fields whose strings are secrets (webhook signing secrets, passwords)."""
SAFE_DESTINATION = "127.0.0.1:9"  # the discard port: nothing listens, nothing leaves


@dataclass
class Report(Tally):
    """``unexpected_status``: answers with a status the document does not give the operation
    (schemathesis' ``status_code_conformance``), and raw-phase answers outside the allowed
    ones."""

    by_operation: Counter[str] = field(default_factory=Counter)
    by_phase: Counter[str] = field(default_factory=Counter)
    check_failures: Counter[str] = field(default_factory=Counter)
    transport_errors: int = 0
    rewritten: Counter[str] = field(default_factory=Counter)
    protocol_no_answer: Counter[str] = field(default_factory=Counter)
    protocol_no_answer_offending: int = 0
    generation_errors: list[str] = field(default_factory=list)

    def offence(self, reason: str, case: ApiCase, response: Any | None) -> None:
        self.offending += 1
        if len(self.examples) >= MAX_EXAMPLES:
            return
        example: dict[str, Any] = {"reason": reason, "operation": case.operation.label}
        with contextlib.suppress(Exception):
            example["request"] = case.as_curl_command()[:1000]
        if response is not None:
            example["status"] = response.status_code
            example["answer"] = response.text_lossy()[:500]
        self.examples.append(example)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.counts(),
            "by_phase": dict(self.by_phase),
            "by_operation": dict(sorted(self.by_operation.items())),
            "check_failures": dict(self.check_failures),
            "transport_errors": self.transport_errors,
            "protocol_no_answer_allowed": dict(self.protocol_no_answer),
            "protocol_no_answer_offending": self.protocol_no_answer_offending,
            "rewritten_for_safety": dict(self.rewritten),
            "generation_errors": self.generation_errors[:MAX_EXAMPLES],
        }  # fmt: skip


class Guard:
    """Keeps the run to what it may touch (module docstring), learning what it created."""

    def __init__(self, me: str, protected_tokens: set[str], report: Report) -> None:
        self.me = me
        self.protected_tokens = protected_tokens
        self.created_users: set[str] = set()
        self.created_tokens: set[str] = set()
        self._report = report

    def before(self, case: ApiCase) -> None:
        path, method = case.operation.path, case.operation.method.upper()
        params = case.path_parameters or {}
        if path == f"{API}/admin/users/{{username}}" and method in {"PATCH", "DELETE"}:
            username = params.get("username")
            if isinstance(username, str) and self._may_exist(username):
                params["username"] = f"fzgone{uuid.uuid4().hex[:12]}"
                self._report.rewritten["admin user not created by the run"] += 1
        if path == f"{API}/tokens/{{token_id}}" and method == "DELETE":
            token_id = params.get("token_id")
            if token_id in self.protected_tokens and token_id not in self.created_tokens:
                params["token_id"] = f"tok_fzgone{uuid.uuid4().hex[:12]}"
                self._report.rewritten["token not created by the run"] += 1
        field = "url" if path.startswith(f"{API}/destinations") else "forward_url"
        url = case.body.get(field) if isinstance(case.body, dict) else None
        if isinstance(url, str) and isinstance(case.body, dict):
            safe = _loopback_url(url)
            if safe != url:
                case.body[field] = safe
                self._report.rewritten[f"{field} pointed at 127.0.0.1:9"] += 1

    def _may_exist(self, username: str) -> bool:
        return username not in self.created_users and is_valid_username(username)

    def after(self, case: ApiCase, response: Response) -> None:
        if response.status_code != 201:
            return
        path = case.operation.path
        body = _json(response)
        if not isinstance(body, dict):
            return
        if path == f"{API}/admin/users" and isinstance(body.get("username"), str):
            self.created_users.add(body["username"])
        if path == f"{API}/tokens" and isinstance(body.get("id"), str):
            self.created_tokens.add(body["id"])


def _loopback_url(url: str) -> str:
    """``url`` with its host and port replaced by ``SAFE_DESTINATION``; unchanged when it has
    no host or cannot be parsed (the API refuses those itself)."""
    try:
        parts = urlsplit(url)
        if not parts.hostname:
            return url
        parts.port  # noqa: B018 - an invalid port raises: leave such a URL to the API's 400
    except ValueError:
        return url
    userinfo, at, _ = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{SAFE_DESTINATION}"))


def _json(response: Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


class Fuzzer:
    def __init__(
        self, base: str, token: str, n: int, seed: int,
        responses: list[tuple[str, str]] | None,
    ) -> None:  # fmt: skip
        self.base = base.rstrip("/")
        self.token = token
        self.n = n
        self.seed = seed
        self.report = Report(seed, n)
        self.responses = responses
        self.session = requests.Session()
        self.rng = random.Random(f"{seed}:auth")
        self.secrets: set[str] = {token}
        self.issued: dict[int, str] = {}  # answer number -> the token it issued
        self.texts: list[tuple[str, str]] = []
        self.schema = schemathesis.openapi.from_url(f"{self.base}{API}/openapi.json")
        me = self._get("/me")
        tokens = self._get("/tokens")
        self.guard = Guard(me["username"], {t["id"] for t in tokens}, self.report)
        self.pinned = self._pinned_parameters()

    # --- setup --------------------------------------------------------------------------------

    def _get(self, path: str) -> Any:
        response = self.session.get(f"{self.base}{API}{path}", headers=self._auth(), timeout=30)
        response.raise_for_status()
        return response.json()

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def _pinned_parameters(self) -> dict[str, list[str]]:
        """Path parameter values the token's owner has: webhooks (two made here, so there are
        some), the events listed under them, a destination and a route of each webhook."""
        destination = f"fz-{self.seed}-d-{uuid.uuid4().hex[:6]}"
        self.session.post(f"{self.base}{API}/destinations", headers=self._auth(), timeout=30,
                          json={"name": destination, "url": f"http://{SAFE_DESTINATION}/"})  # fmt: skip
        for suffix in ("a", "b"):
            name = f"fz-{self.seed}-{suffix}-{uuid.uuid4().hex[:6]}"
            self.session.post(f"{self.base}{API}/webhooks", json={"name": name},
                              headers=self._auth(), timeout=30)  # fmt: skip
            self.session.post(f"{self.base}{API}/webhooks/{name}/routes", headers=self._auth(),
                              json={"name": "fz-route", "destination": destination}, timeout=30)  # fmt: skip
        names = [w["name"] for w in self._get("/webhooks")]
        events: list[str] = []
        routes: set[str] = set()
        for name in names:
            page = self._get(f"/webhooks/{name}/events?limit=5")
            events += [e["id"] for e in page["items"]]
            routes |= {r["name"] for r in self._get(f"/webhooks/{name}/routes")}
        dests = [d["name"] for d in self._get("/destinations")]
        return {"name": names, "event_id": events[:20], "dest": dests, "route": sorted(routes)}

    # --- one request --------------------------------------------------------------------------

    def send(self, case: ApiCase, phase: str) -> Response | None:
        """Send ``case`` (made safe first), check the answer, record it."""
        self.guard.before(case)
        number = self.report.inputs
        self.report.inputs += 1
        self.report.requests += 1
        self.report.by_phase[phase] += 1
        label = case.operation.label
        self.report.by_operation[label] += 1
        headers = self._auth()
        if phase == "operations" and number % WRONG_AUTH_EVERY == WRONG_AUTH_EVERY - 1:
            headers = self.rng.choice([{}, {"Authorization": "Bearer hbk_" + "x" * 43},
                                       {"Authorization": "Basic Zm9vOmJhcg=="}])  # fmt: skip
        stream = case.operation.path.endswith("/events/stream")
        try:
            response = case.call(
                base_url=self.base, session=self.session, headers=headers,
                timeout=STREAM_SECONDS if stream else TIMEOUT,
            )  # fmt: skip
        except requests.RequestException as exc:
            if stream and isinstance(exc, requests.Timeout):
                return None  # a tail that sent nothing within its time: expected
            self.report.transport_errors += 1
            self.report.offence(f"no answer: {type(exc).__name__}: {exc}"[:300], case, None)
            return None
        self._judge(case, response, headers)
        if 200 <= response.status_code < 300:
            self._collect_stored_secrets(case)
        self.guard.after(case, response)
        self._record(number, label, response, _echoable(case))
        return response

    def _collect_stored_secrets(self, case: ApiCase) -> None:
        """The secret fields of an accepted request (a refused one stored nothing). A value an
        earlier answer already held is the API's own wording, not a secret: schemathesis feeds
        strings seen in answers back as inputs ("Content-Disposition" as a password)."""
        body = case.body
        if not isinstance(body, dict):
            return
        headers = body.get("headers")
        if case.operation.path.startswith(f"{API}/destinations") and isinstance(headers, dict):
            for value in headers.values():  # destination header values are write-only
                self._keep_secret(value)
        for key in SECRET_FIELDS:
            self._keep_secret(body.get(key))

    def _keep_secret(self, value: Any) -> None:
        if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH:
            return
        if value not in self.secrets and not any(value in t for _, t in self.texts):
            self.secrets.add(value)

    def _judge(self, case: ApiCase, response: Response, headers: dict[str, str]) -> None:
        status = response.status_code
        self.report.by_status[str(status)] += 1
        if status >= 500:
            self.report.five_xx += 1
            self.report.offence(f"{status}", case, response)
        if status >= 400 and not _error_body_ok(response):
            self.report.non_json_errors += 1
            self.report.offence("error body is not JSON with error and message", case, response)
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except AssertionError as exc:  # schemathesis' Failure, or a FailureGroup of them
            failures = getattr(exc, "exceptions", None) or [exc]
            for failure in failures:
                title = str(getattr(failure, "title", type(failure).__name__))
                self.report.check_failures[title] += 1
                self.report.unexpected_status += isinstance(failure, UndefinedStatusCode)
                message = str(getattr(failure, "message", failure))[:300]
                self.report.offence(f"check: {title}: {message}", case, response)

    def _record(self, number: int, label: str, response: Response, echoable: list[str]) -> None:
        head = f"HTTP {response.status_code}\n" + "".join(
            f"{name}: {value}\n" for name, values in response.headers.items() for value in values
        )
        raw = head + "\n" + response.text_lossy()
        body = _json(response)
        token = (
            body.get("token") if response.status_code == 201 and isinstance(body, dict) else None
        )
        if isinstance(token, str):  # shown once, in this answer: nowhere else (nor in a file)
            self.secrets.add(token)
            raw = raw.replace(token, "<the token this answer issued>")
        # Hypothesis reuses values across fields and examples: a name in the path may equal a
        # password sent elsewhere, and a 404 rightly echoes the name
        text = redact(raw, echoable)
        self.texts.append((f"api#{number} {label} {response.status_code}", text))
        if self.responses is not None:
            self.responses.append((f"api#{number} {label}", raw))

    # --- the phases ---------------------------------------------------------------------------

    def operations(self, budget: int) -> None:
        """``budget`` requests spread over the operations, in passes until it is spent (an
        operation with little to vary runs out of new examples: the others take its share)."""
        operations = [result.ok() for result in self.schema.get_all_operations()]  # type: ignore[union-attr]
        target = self.report.inputs + budget
        for round_ in range(8):
            before = self.report.inputs
            for at, operation in enumerate(operations):
                left = target - self.report.inputs
                if left <= 0:
                    return
                share = max(1, left // (len(operations) - at))
                self._operation(operation, share, round_)
            if self.report.inputs == before:
                return

    def _operation(self, operation: Any, share: int, round_: int) -> None:
        stream = operation.path.endswith("/events/stream")
        if stream:
            share = min(share, max(2, self.n // 1000))
        pinned = {
            name: values for name, values in self.pinned.items()
            if values and f"{{{name}}}" in operation.path
        }  # fmt: skip
        plans: list[tuple[GenerationMode, dict[str, Any] | None]] = [
            (GenerationMode.POSITIVE, None), (GenerationMode.NEGATIVE, None),
        ]  # fmt: skip
        deletes_pinned = operation.method.upper() == "DELETE" and "{name}" in operation.path
        if pinned and not deletes_pinned:  # the owner's webhooks stay for the other operations
            plans.append((GenerationMode.POSITIVE, pinned))
        each = max(1, share // len(plans))
        for number, (mode, pins) in enumerate(plans):
            # not hash(): string hashes differ from process to process (PYTHONHASHSEED)
            seed = zlib.crc32(f"{self.seed}:{operation.label}:{round_}:{number}".encode())
            self._examples(operation, mode, pins, each, seed)

    def _examples(
        self, operation: Any, mode: GenerationMode, pins: dict[str, list[str]] | None,
        count: int, seed: int,
    ) -> None:  # fmt: skip
        rng = random.Random(seed)
        path_parameters = {name: rng.choice(values) for name, values in (pins or {}).items()}
        try:
            strategy = operation.as_strategy(
                generation_mode=mode, path_parameters=path_parameters or None
            )
        except Exception as exc:  # an operation without negative space, say
            self.report.generation_errors.append(f"{operation.label} {mode.value}: {exc}"[:200])
            return

        @hypothesis.seed(seed)
        @hypothesis.settings(
            max_examples=count, database=None, deadline=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck), derandomize=False,
        )  # fmt: skip
        @hypothesis.given(case=strategy)
        def run(case: ApiCase) -> None:
            self.send(case, "operations")

        try:
            run()
        except hypothesis.errors.Unsatisfiable as exc:
            self.report.generation_errors.append(f"{operation.label} {mode.value}: {exc}"[:200])

    def stateful(self, budget: int) -> None:
        """Scenarios of the inferred links until ``budget`` requests were sent."""
        fuzzer = self
        target = self.report.inputs + budget

        class Machine(self.schema.as_state_machine()):  # type: ignore[misc]
            def call(self, case: ApiCase, **kwargs: Any) -> Any:
                response = fuzzer.send(case, "stateful")
                if response is None:  # no answer (counted): nothing to follow from it
                    hypothesis.reject()
                return response

            def validate_response(self, response: Any, case: ApiCase,
                                  *args: Any, **kwargs: Any) -> None:  # fmt: skip
                """Judged in ``call`` already (never raising: the run goes on)."""

        for round_ in range(1000):
            if self.report.inputs >= target:
                return
            before = self.report.inputs
            machine = hypothesis.seed(self.seed * 1000 + round_)(Machine)
            settings = hypothesis.settings(
                max_examples=max(2, (target - self.report.inputs) // 10), database=None,
                deadline=None, stateful_step_count=10, phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )  # fmt: skip
            # steps follow the server's answers, so Hypothesis may find a scenario drawing
            # differently from an earlier one with the same start: that ends the round only
            with contextlib.suppress(hypothesis.errors.FlakyStrategyDefinition):
                schemathesis.stateful.run_state_machine_as_test(machine, settings=settings)
            if self.report.inputs == before:
                self.report.generation_errors.append("stateful: a round sent nothing")
                return

    def protocol(self, budget: int) -> None:
        """``budget`` raw HTTP/1.x inputs to the dashboard's server (``protocol_case``),
        judged as ``fuzz_ingest`` judges its own; counted into this run's report."""
        raw = asyncio.run(_protocol_run(self.base, self.token, budget, self.seed))
        report = self.report
        report.inputs += raw.inputs
        report.requests += raw.requests
        report.by_phase["protocol"] += raw.inputs
        report.by_status.update(raw.by_status)
        report.five_xx += raw.five_xx
        report.non_json_errors += raw.non_json_errors
        report.unexpected_status += raw.unexpected_status
        report.protocol_no_answer.update(raw.no_answer_allowed)
        report.protocol_no_answer_offending += raw.no_answer_offending
        report.offending += raw.offending
        for example in raw.examples[: max(0, MAX_EXAMPLES - len(report.examples))]:
            example["input"] = example["input"].replace(self.token, "<token>")
            report.examples.append(example)
        self.texts += raw.answers
        if self.responses is not None:
            self.responses += raw.answers

    def clean_up(self) -> dict[str, int]:
        """Delete the users and tokens the run created (not counted as inputs): the accounts
        it made, admins among them, hold live tokens."""
        gone = Counter[str]()
        for username in sorted(self.guard.created_users):
            url = f"{self.base}{API}/admin/users/{username}"
            response = self.session.delete(url, headers=self._auth(), timeout=60)
            gone["users"] += response.status_code == 204
        for token_id in sorted(self.guard.created_tokens):
            url = f"{self.base}{API}/tokens/{token_id}"
            response = self.session.delete(url, headers=self._auth(), timeout=60)
            gone["tokens"] += response.status_code == 204
        return dict(gone)

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        stateful = int(self.n * STATEFUL_SHARE)
        protocol = max(10, int(self.n * PROTOCOL_SHARE))
        self.protocol(protocol)
        self.operations(self.n - stateful - protocol)
        self.stateful(max(stateful, self.n - self.report.inputs))
        self.report.duration = time.monotonic() - started
        result = self.report.as_dict()
        result["cleaned_up"] = self.clean_up()
        result["leaks"] = scan(self.texts, self.secrets)
        result["secrets_seen"] = sorted(self.secrets)
        return result


# --- raw HTTP/1.x to the dashboard's server ---------------------------------------------------

_ANY = frozenset(range(100, 500))  # any answer short of a 5xx: judged on its JSON and presence


def protocol_case(seed: int, index: int, token: str) -> Case:
    """Raw input ``index``: bytes an HTTP client library would not send (malformed framing and
    headers, protocol upgrades, pipelining, HTTP/1.0, slow senders), to real routes."""
    rng = random.Random(f"{seed}:protocol:{index}")
    auth = f"Authorization: Bearer {token}\r\n".encode()
    me = b"GET /api/v1/me HTTP/1.1\r\nHost: x\r\n" + auth
    bad_body = b'{"name": "Not A Name"}'
    post = b"POST /api/v1/webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + auth
    length = f"Content-Length: {len(bad_body)}\r\n".encode()
    ws = (b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")  # fmt: skip
    variants: list[tuple[str, list[bytes], list[Req], dict[str, Any]]] = [
        ("length_not_a_number", [post + b"Content-Length: abc\r\n\r\n" + bad_body], [], {}),
        ("length_negative", [post + b"Content-Length: -1\r\n\r\n" + bad_body], [], {}),
        ("two_lengths", [post + length + b"Content-Length: 3\r\n\r\n" + bad_body], [], {}),
        (
            "length_and_chunked",
            [post + length + b"Transfer-Encoding: chunked\r\n\r\n" + b"0\r\n\r\n"],
            [],
            {},
        ),
        ("bad_chunk", [post + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + bad_body], [], {}),
        ("garbage_line", [b"GARBAGE\r\n\r\n"], [], {}),
        ("bad_version", [b"GET /api/v1/me HTTP/9.9\r\nHost: x\r\n\r\n"], [], {}),
        ("unknown_method", [b"FOO /api/v1/me HTTP/1.1\r\nHost: x\r\n\r\n"], [], {}),
        ("nul_in_header", [me + b"X-Nul: a\x00b\r\n\r\n"], [], {}),
        ("no_colon", [me + b"X-No-Colon\r\n\r\n"], [], {}),
        ("space_before_colon", [me + b"X-Space : v\r\n\r\n"], [], {}),
        ("lf_only", [me.replace(b"\r\n", b"\n") + b"\n"], [], {}),
        ("non_ascii_path", [b"GET /\xff\xfe/x HTTP/1.1\r\nHost: x\r\n\r\n"], [], {}),
        ("tls_hello", [bytes.fromhex("160301020001") + rng.randbytes(300)], [], {}),
        ("random_bytes", [bytes([rng.randint(0x80, 0xFF)]) + rng.randbytes(500)], [], {}),
        ("websocket", [me + ws + b"\r\n"], [Req("GET", _ANY)], {}),
        (
            "websocket_stream",
            [
                b"GET /api/v1/webhooks/nope/events/stream HTTP/1.1\r\nHost: x\r\n"
                + auth
                + ws
                + b"\r\n"
            ],
            [Req("GET", _ANY)],
            {},
        ),
        (
            "h2c_with_body",
            [
                post + length + b"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings"
                b"\r\nHTTP2-Settings: AAMAAABkAAQ\r\n\r\n" + bad_body
            ],
            [Req("POST", _ANY)],
            {},
        ),
        ("pipelined", [(me + b"\r\n") * 3], [Req("GET", _ANY)] * 3, {}),
        (
            "expect_continue",
            [post + length + b"Expect: 100-continue\r\n\r\n", bad_body],
            [Req("POST", _ANY)],
            {"expect_continue": True},
        ),
        ("http10", [me.replace(b"HTTP/1.1", b"HTTP/1.0") + b"\r\n"], [Req("GET", _ANY)], {}),
        (
            "huge_header",
            [me + b"X-Big: " + b"b" * 100_000 + b"\r\n\r\n"],
            [Req("GET", _ANY)],
            {},
        ),
        ("head", [me.replace(b"GET", b"HEAD", 1) + b"\r\n"], [Req("HEAD", _ANY)], {}),
        ("slow", [bytes([b]) for b in me + b"\r\n"], [Req("GET", _ANY)], {"pause": 0.001}),
        (
            "get_body_then_eof",  # a route without a body of its own still reads it
            [me + b"Content-Length: 100\r\n\r\nabc"],
            [Req("GET", _ANY)],
            {"then": "half_close", "no_answer": "incomplete_at_eof"},
        ),
        (
            "length_longer_then_eof",
            [post + b"Content-Length: 999\r\n\r\n" + bad_body],
            [Req("POST", _ANY)],
            {"then": "half_close", "no_answer": "incomplete_at_eof"},
        ),
        (
            "closed_mid_head",
            [bytes([b]) for b in me[: rng.randint(5, len(me) - 1)]],
            [Req("GET", _ANY)],
            {"then": "close", "no_answer": "sender_closed"},
        ),
    ]
    kind, parts, requests_, extra = variants[index % len(variants)]
    if not requests_:  # the framing is broken: one answer, a 400
        requests_ = [Req("-", _ANY)]
    return Case(index, f"protocol:{kind}", parts, list(requests_), timeout=10.0, **extra)


async def _protocol_run(base: str, token: str, count: int, seed: int) -> RawReport:
    parts = urlsplit(base)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    report = RawReport(seed, count)
    slots = asyncio.Semaphore(8)

    async def one(index: int) -> None:
        async with slots:
            made = protocol_case(seed, index, token)
            outcome = await exchange(host, port, made)
            judge(made, outcome, report, ingest=False)
            report.answers += [(f"protocol#{index} {made.kind}", a.text()) for a in outcome.answers]

    await asyncio.gather(*(one(index) for index in range(count)))
    return report


@dataclass
class RawReport(IngestReport):
    """``fuzz_ingest``'s report, keeping the answers for the leak scan."""

    answers: list[tuple[str, str]] = field(default_factory=list)


def _echoable(case: ApiCase) -> list[str]:
    """The strings ``case`` sends outside its secret fields: path, query, headers, body."""
    found: list[str] = []

    def walk(value: Any, key: str | None = None) -> None:
        if isinstance(value, str) and key not in SECRET_FIELDS:
            found.append(value)
        elif isinstance(value, dict):
            for name, item in value.items():
                walk(str(name))
                walk(item, str(name))
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    for part in (case.path_parameters, case.query, case.headers, case.cookies, case.body):
        walk(part)
    return found


def _header(response: Response, name: str) -> str:
    return ", ".join(response.headers.get(name, []))


def _error_body_ok(response: Response) -> bool:
    if not _header(response, "content-type").startswith("application/json"):
        return False
    body = _json(response)
    return (
        isinstance(body, dict)
        and isinstance(body.get("error"), str)
        and isinstance(body.get("message"), str)
    )


def fuzz_api(
    base: str, token: str, n: int, seed: int = 0, *,
    responses: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Fuzz the dashboard API at ``base`` (``http://127.0.0.1:PORT``) as the owner of ``token``
    with at least ``n`` requests; the counts, ``leaks`` (secrets or stack traces in answers) and
    ``secrets_seen`` (every secret the run sent or was issued, the token included, for the
    caller's log scan; never written to a report). ``responses``, when given, receives every
    answer as ``(label, text)``, a token an answer issued replaced by a placeholder. Blocking:
    call it from a thread in async code.

    The run happens in a process of its own (spawned, not forked: the caller may run threads
    and an event loop). Hypothesis requires that the global ``random`` state does not change
    while it draws an example (``HypothesisDeprecationWarning``: "Do not use the `random` module
    inside strategies"), and in the caller's process other threads change it at any moment:
    pymongo draws each request id from it and aiokafka picks brokers with it, in the event loop
    beside the thread this is called from. Hypothesis also seeds that global state while it
    runs, which would make those threads' draws repeat. Alone in its process, the run draws
    only from Hypothesis' own randomness."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as child:
        result, answers = child.submit(_run, base, token, n, seed, responses is not None).result()
    if responses is not None:
        responses += answers
    return result


def _run(
    base: str, token: str, n: int, seed: int, keep_answers: bool
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``fuzz_api``'s run, in the child process; the report and (when kept) the answers. A
    failure comes back as a ``RuntimeError`` with its text: schemathesis' own exceptions do not
    survive the trip between processes (their constructors take keywords pickle does not pass)."""
    answers: list[tuple[str, str]] = []
    try:
        result = Fuzzer(base, token, n, seed, answers if keep_answers else None).run()
    except BaseException as exc:  # schemathesis' FailureGroup is a BaseExceptionGroup
        raise RuntimeError(f"{type(exc).__name__}: {exc}") from None
    return result, answers

"""Fuzzing of the receiving endpoint: raw HTTP/1.x over asyncio streams, so that it can
send what no HTTP client library would.

``fuzz_ingest(base, targets, n, seed)`` sends ``n`` inputs, each on a connection of its own: every
method, odd, long, percent-encoded, unicode and traversal paths and names, unknown users and
webhooks, inactive webhooks, signed and badly signed requests, huge and malformed headers,
duplicate headers, header injection, protocol upgrades, ``Expect: 100-continue``, bodies up to
and past the size limit, chunked bodies (valid, malformed, with trailers), lying
``Content-Length`` (shorter, longer, negative, not a number, two of them, with chunked), slow
senders (byte by byte, some hanging up mid-request), pipelined requests, HTTP/1.0 and garbage.

Reproducible: input ``i`` of seed ``s`` is made by ``random.Random(f"{s}:{i}")`` alone, and the
kind of each input follows a fixed weighted cycle (``KINDS``), so a run's mix is the same every
time and one offending input can be made again from its index (``case(targets, seed, index)``).

Every answer is judged:

- never a 5xx;
- every 4xx/5xx body is a JSON object with a string ``error`` (docs/owners/receiving.md, "Answers"), except the answer to a
  ``HEAD``, which has no body by HTTP's rules;
- the status is one the input may get (each input carries the statuses allowed for it by the
  documented order of checks, docs/owners/receiving.md); 429 is allowed wherever the rate
  limit is reached, since a run may exceed a plan's rate;
- a 200 is ``{"success": true, "requestId": "req_..."}``; its request id and the SHA-256 of the
  body as the request framed it are kept in ``accepted``, for the caller to find in Kafka
  (``missing_from_kafka``);
- an input gets one answer per request it holds. A connection closed without an answer is an
  offence, except where the request itself was never complete, i.e. the framing broke on the
  sender's side (``NO_ANSWER_ALLOWED``): the sender hung up mid-request (``sender_closed``), or
  the sender shut its side with a request still incomplete — a ``Content-Length`` longer than
  the bytes sent, a chunked body without its last chunk (``incomplete_at_eof``). The server cannot
  tell the end of such a request; uvicorn treats the end of the stream as the client going away
  (the answer, if any, has nobody to read it), so closing is the only honest reaction.

The result counts everything (``by_status``, ``5xx``, ``non_json_errors``, ``unexpected_status``,
``no_answer``) and lists at most ``MAX_EXAMPLES`` offending inputs; ``responses`` (when given)
receives every answer as ``(label, head and body)`` for ``tests.chaos.leaks.scan``.

Run by ``tests/chaos/fuzzing.py`` (``make chaos --fuzz N``, and a short run in ``make test``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import random
import string
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from hookbay_common.names import is_valid_username, is_valid_webhook_name

MAX_EXAMPLES = 20
LIMIT = 4_500_000  # HOOKBAY_MAX_BODY_BYTES, the documented 4.5 MB
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADER_COUNT = 100
HEAD_SLACK_BYTES = 16 * 1024  # hookbay_ingest.server: refused while arriving past limit + slack
NO_ANSWER_ALLOWED = {
    "sender_closed": "the sender closed the connection before its request was complete",
    "incomplete_at_eof": (
        "the sender shut its side with a request still incomplete (Content-Length longer than "
        "the bytes sent, chunked body without its last chunk): the server cannot frame it"
    ),
    "nothing_sent": "the connection carried no request",
}
METHODS = [
    "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "PROPFIND", "PROPPATCH",
    "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "SEARCH", "PURGE", "LINK", "UNLINK", "REPORT",
    "MKACTIVITY", "CHECKOUT", "MERGE", "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "QUERY", "SOURCE",
]  # fmt: skip
ODD_METHODS = ["FOO", "post", "P0ST", "GETT", "POST2", "X" * 200, "PO ST", "CONNECT"]
DOCUMENTED = frozenset({200, 400, 401, 403, 404, 405, 413, 429, 431})
"""Every status the receiving endpoint documents short of a 503 (which a fuzz run, with Kafka
up, must not see)."""


@dataclass(frozen=True)
class Target:
    path: str
    username: str
    webhook: str
    secret: str | None
    active: bool
    verification: str | None = None
    """A provider preset (``stripe``, ``github``, ``slack``, ``meta``, ``x``): the target of
    ``kind_provider`` only, signed the provider's way (docs/owners/verification.md)."""
    mode: str = "enforce"
    verify_token: str | None = None

    @classmethod
    def of(cls, spec: dict[str, str]) -> Target:
        """``{"path": "/w/<user>/<hook>", "secret": "...", "active": "false"}``; a missing or
        empty secret means an unsigned webhook, ``active`` defaults to true; ``verification``,
        ``mode`` and ``verify_token`` make a provider target."""
        _, w, username, webhook = spec["path"].split("/")
        assert w == "w", spec
        active = spec.get("active", "true").lower() not in {"false", "0", "no"}
        return cls(
            spec["path"], username, webhook, spec.get("secret") or None, active,
            spec.get("verification") or None, spec.get("mode") or "enforce",
            spec.get("verify_token") or None,
        )  # fmt: skip


@dataclass
class Req:
    """One HTTP request inside an input: its method and the statuses it may be answered with.
    ``body`` is the body as the request frames it (a 200 must have queued exactly that);
    ``any_body`` allows a 200 whose body framing is the server's call (e.g. bytes after an
    injected blank line); with neither, a 200 is never right."""

    method: str
    allowed: frozenset[int]
    body: bytes | None = None
    any_body: bool = False
    handshake: bool = False
    """A sender's handshake: its 200 is the handshake's answer, not ``{success, requestId}``,
    and the event it records is never forwarded."""


@dataclass
class Case:
    """One input: bytes written on a fresh connection (``parts``, with ``pause`` seconds between
    them: a slow sender), then ``then``: wait for the answers, shut the write side
    (``half_close``) or close at once (``close``, nobody reads an answer)."""

    index: int
    kind: str
    parts: list[bytes]
    requests: list[Req]
    pause: float = 0.0
    then: Literal["wait", "half_close", "close"] = "wait"
    no_answer: str | None = None
    """Key of ``NO_ANSWER_ALLOWED`` when a missing answer is the sender's doing."""
    extra_answers: bool = False
    """Bytes after the requests that the server may answer (400) before closing."""
    expect_continue: bool = False
    """``parts[0]`` is the head; the rest is sent after ``100 Continue`` (or 1 s without)."""
    timeout: float = 20.0
    note: str = ""

    def describe(self) -> str:
        data = b"".join(self.parts)
        shown = data[:300] + (f"... ({len(data)} bytes)".encode() if len(data) > 300 else b"")
        return shown.decode("latin-1")


@dataclass
class Answer:
    status: int
    head: bytes
    headers: dict[str, str]
    body: bytes

    def text(self) -> str:
        return (self.head + self.body).decode("utf-8", "replace")


@dataclass
class Outcome:
    answers: list[Answer] = field(default_factory=list)
    continues: int = 0
    ended: str = "complete"  # complete | eof | timeout | reset | truncated | not_read
    error: str = ""


# --- input generation ---------------------------------------------------------------------------

_NAME_CHARS = string.ascii_lowercase + string.digits
_UNICODE = "äöüßéèçñ€漢字日本語😀🚀\u202e\u200b\u00a0ŁØ∑√"
_WEIRD_TEXT = _UNICODE + "\x00\x01\x1f\x7f\t\r\n\"'\\<>&%{}[]$."


class Gen:
    """What one input is made of, drawn from its own ``random.Random``."""

    def __init__(
        self, rng: random.Random, targets: list[Target], limits: Limits, now: float = 0.0
    ) -> None:
        self.rng = rng
        self.providers = [t for t in targets if t.verification is not None]
        self.targets = [t for t in targets if t.verification is None]
        self.limits = limits
        self.active = [t for t in self.targets if t.active] or self.targets
        self.inactive = [t for t in self.targets if not t.active]
        self.now = now
        """The sending time, for the presets that sign a timestamp."""

    def target(self) -> Target:
        return self.rng.choice(self.active)

    def name(self, length: int = 12) -> str:
        return "fz" + "".join(self.rng.choice(_NAME_CHARS) for _ in range(length))

    def text(self, size: int, alphabet: str = _UNICODE + string.ascii_letters) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(size))

    def size(self) -> int:
        roll = self.rng.random()
        if roll < 0.1:
            return 0
        if roll < 0.8:
            return self.rng.randint(1, 2048)
        if roll < 0.97:
            return self.rng.randint(2049, 200_000)
        return self.rng.randint(200_001, 1_500_000)

    def body(self, size: int | None = None) -> tuple[bytes, str]:
        """A body and its content type: JSON, form, XML, text or binary."""
        size = self.size() if size is None else size
        kind = self.rng.choice(["json", "form", "xml", "text", "binary", "binary"])
        if kind == "binary" or size > 50_000:
            return self.rng.randbytes(size), "application/octet-stream"
        if kind == "json":
            fields = {self.text(5): self.text(self.rng.randint(0, 40)) for _ in range(size // 40)}
            data = json.dumps({"id": self.rng.randint(0, 10**9), **fields}, ensure_ascii=False)
            return data.encode(), "application/json"
        if kind == "form":
            pairs = [f"{quote(self.text(4))}={quote(self.text(12))}" for _ in range(size // 20 + 1)]
            return "&".join(pairs).encode(), "application/x-www-form-urlencoded"
        if kind == "xml":
            items = "".join(
                f"<i>{self.text(8, string.ascii_letters)}</i>" for _ in range(size // 12)
            )
            return f'<?xml version="1.0"?><order>{items}</order>'.encode(), "application/xml"
        return self.text(size, _WEIRD_TEXT).encode("utf-8", "surrogatepass"), "text/plain"

    def signature(self, secret: str, body: bytes, style: str = "plain") -> str:
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return {
            "plain": digest, "prefixed": f"sha256={digest}", "upper": digest.upper(),
            "spaced": f"  sha256={digest} \t", "prefix_upper": f"SHA256={digest.upper()}",
        }[style]  # fmt: skip

    def headers(
        self, target: Target, body: bytes, content_type: str, *, length: bool = True
    ) -> list[tuple[bytes, bytes]]:
        """The headers of a well-formed, correctly signed request to ``target``."""
        headers = [(b"Host", b"127.0.0.1"), (b"Content-Type", content_type.encode())]
        if length:
            headers.append((b"Content-Length", str(len(body)).encode()))
        if target.secret is not None:
            style = self.rng.choice(["plain", "prefixed", "upper", "spaced", "prefix_upper"])
            headers.append(
                (b"X-Service-Signature", self.signature(target.secret, body, style).encode())
            )
        if self.rng.random() < 0.3:
            headers.append((b"User-Agent", b"hookbay-fuzz/1"))
        return headers


@dataclass(frozen=True)
class Limits:
    body: int = LIMIT
    header_bytes: int = MAX_HEADER_BYTES
    header_count: int = MAX_HEADER_COUNT


def request(
    method: str | bytes,
    target: str | bytes,
    headers: Iterable[tuple[bytes, bytes]],
    body: bytes = b"",
    version: bytes = b"HTTP/1.1",
) -> bytes:
    method = method.encode() if isinstance(method, str) else method
    target = target.encode("utf-8") if isinstance(target, str) else target
    lines = [method + b" " + target + b" " + version]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def chunked(body: bytes, rng: random.Random, *, extensions: bool = False) -> bytes:
    """``body`` in chunks of random sizes, with the last chunk (no trailers)."""
    out: list[bytes] = []
    at = 0
    while at < len(body):
        size = min(rng.randint(1, 70_000), len(body) - at)
        line = f"{size:x}".encode()
        if extensions and rng.random() < 0.5:
            line += b";name=" + rng.choice([b"value", b'"quoted value"', b"x"])
        out.append(line + b"\r\n" + body[at : at + size] + b"\r\n")
        at += size
    return b"".join(out) + b"0\r\n"


def _after_lookup(*statuses: int) -> frozenset[int]:
    """Statuses of a request that passes the user and webhook checks: the rate limit may
    answer first."""
    return frozenset({*statuses, 429})


def _accepts(target: Target, *statuses: int) -> frozenset[int]:
    return _after_lookup(*statuses) if target.active else frozenset({403})


def _post(g: Gen, target: Target) -> tuple[bytes, Req]:
    body, content_type = g.body()
    data = request("POST", target.path, g.headers(target, body, content_type), body)
    return data, Req("POST", _accepts(target, 200), body=body)


def kind_valid(g: Gen, i: int) -> Case:
    target = g.target()
    data, req = _post(g, target)
    return Case(i, "valid", [data], [req])


def kind_signature(g: Gen, i: int) -> Case:
    target = g.target()
    body, content_type = g.body(g.rng.randint(0, 500))
    headers = g.headers(target, body, content_type)
    headers = [h for h in headers if h[0] != b"X-Service-Signature"]
    secret = target.secret or "no-secret-configured"
    bad = g.rng.choice(["missing", "wrong_body", "wrong_secret", "garbage", "empty", "truncated",
                        "unicode", "good_twice", "good_and_bad", "prefix_only", "good"])  # fmt: skip
    good = g.signature(secret, body, "prefixed")
    values: list[bytes] = {
        "missing": [],
        "wrong_body": [g.signature(secret, body + b"x").encode()],
        "wrong_secret": [g.signature(secret + "x", body).encode()],
        "garbage": [g.rng.randbytes(32).hex().encode() + b"zz"],
        "empty": [b""],
        "truncated": [good[:-1].encode()],
        "unicode": ["sha256=ä€😀".encode()],
        "good_twice": [good.encode(), good.encode()],
        "good_and_bad": [good.encode(), b"sha256=00"],
        "prefix_only": [b"sha256="],
        "good": [good.encode()],
    }[bad]
    headers += [(b"X-Service-Signature", v) for v in values]
    valid = bad == "good"
    allowed = _accepts(target, 200 if valid or target.secret is None else 401)
    data = request("POST", target.path, headers, body)
    return Case(i, "signature", [data], [Req("POST", allowed, body=body)], note=bad)


def kind_method(g: Gen, i: int) -> Case:
    target = g.target()
    odd = g.rng.random() < 0.25
    method = g.rng.choice(ODD_METHODS if odd else METHODS)
    body = g.rng.randbytes(g.rng.randint(0, 64)) if g.rng.random() < 0.5 else b""
    headers = [(b"Host", b"x")] + ([(b"Content-Length", str(len(body)).encode())] if body else [])
    path = target.path if g.rng.random() < 0.8 else f"/w/{g.name()}/{g.name()}"
    if method == "CONNECT":
        path = g.rng.choice([path, "127.0.0.1:9", "[::1]:443", "example.invalid:80"])
    allowed = frozenset({400, 405}) if odd else frozenset({405})
    if method == "CONNECT":
        allowed = frozenset({400, 404, 405})
    data = request(method, path, headers, body)
    return Case(i, "method", [data], [Req(method, allowed)], note=method)


def _odd_path(g: Gen, target: Target) -> tuple[str | bytes, bool]:
    """A path near the receiving route; true when it may still reach ``target``."""
    u, h = target.username, target.webhook
    quoted_u = "".join(f"%{ord(c):02x}" for c in u)
    choices: list[tuple[str | bytes, bool]] = [
        (f"/w/{u}/{h}/", False), (f"/w/{u}/{h}?a=1&b=%00", True), (f"/w/{u}/{h}#frag", True),
        (f"//w/{u}/{h}", False), (f"/w//{u}/{h}", False), (f"/w/{u}//{h}", False),
        (f"/w/../w/{u}/{h}", False), (f"/w/{u}/../{h}", False), (f"/w/%2e%2e/{h}", False),
        (f"/w/{u}%2F{h}/x", False), (f"/w/{quoted_u}/{h}", True), (f"/w/{u}/{h}%00", False),
        (f"/w/{u.upper()}/{h}", False), (f"/W/{u}/{h}", False), (f"/w/{u}/{h};p=1", False),
        (f"/w/{u}/{h}%20", False), (f"/w/ {u}/{h}", False), (f"/w/{u}/{h}/..", False),
        ("/w/", False), ("/w", False), ("/", False), ("/w//", False), ("/w//open", False),
        (f"/w/{u}/", False), ("/healthz", False), ("/readyz", False), ("/metrics", False),
        ("/docs", False), ("/openapi.json", False), ("*", False),
        (f"http://127.0.0.1/w/{u}/{h}", True), (f"http://evil.invalid/w/{u}/{h}", True),
        (f"/w/{g.text(3)}/{h}".encode(), False), (f"/w/{u}/{quote(g.text(4))}", False),
        (f"/w/{u}/{'a' * g.rng.choice([65, 1000, 60_000])}", False),
        (f"/w/{'a' * g.rng.choice([40, 5000])}/{h}", False), (b"/w/\xff\xfe/" + h.encode(), False),
        (f"/w/{u}/{h}\t", False), (f"/%77/{u}/{h}", True), (f"/w/{u}/{h}?" + "q" * 20_000, True),
    ]  # fmt: skip
    return g.rng.choice(choices)


def kind_path(g: Gen, i: int) -> Case:
    target = g.target()
    path, reaches = _odd_path(g, target)
    body, content_type = g.body(g.rng.randint(0, 300))
    data = request("POST", path, g.headers(target, body, content_type), body)
    allowed = DOCUMENTED if reaches else DOCUMENTED - {200, 401}
    shown = path if isinstance(path, str) else path.decode("latin-1")
    return Case(i, "path", [data], [Req("POST", allowed, body=body)], note=shown[:80])


def kind_names(g: Gen, i: int) -> Case:
    """Names in the path: unknown users and webhooks, inactive webhooks, grammar breakers."""
    target = g.target()
    roll = g.rng.random()
    if roll < 0.25:
        path, allowed, note = f"/w/{g.name()}/{target.webhook}", frozenset({403}), "unknown user"
    elif roll < 0.5:
        path, allowed, note = f"/w/{target.username}/{g.name()}", frozenset({404}), "unknown hook"
    elif roll < 0.65 and g.inactive:
        path, allowed, note = g.rng.choice(g.inactive).path, frozenset({403}), "inactive"
    else:
        bad = g.rng.choice([
            "Upper", "under_score", "-lead", "trail-", "dou--ble", "a" * 40, "a" * 65, "dot.ted",
            "spa ce", g.text(6), "ünï", "%00", "a/b", "", "..", "~", "a" * 39,
        ])  # fmt: skip
        user_side = g.rng.random() < 0.5
        u, h = (bad, target.webhook) if user_side else (target.username, bad)
        path = f"/w/{quote(u, safe='/~')}/{quote(h, safe='/~')}"
        valid = is_valid_username(u) and is_valid_webhook_name(h)
        allowed = frozenset({403, 404}) if valid else frozenset({400, 404})
        note = f"bad name {bad[:20]!r}"
    body, content_type = g.body(g.rng.randint(0, 200))
    data = request("POST", path, g.headers(target, body, content_type), body)
    return Case(i, "names", [data], [Req("POST", allowed, body=body)], note=note)


def _header_fields(g: Gen, total: int, count: int) -> list[tuple[bytes, bytes]]:
    """``count`` fields named ``X-F<n>`` whose names and values add up to ``total`` bytes."""
    fields = []
    for n in range(count):
        name = f"X-F{n}".encode()
        fields.append((name, b""))
    left = total - sum(len(name) for name, _ in fields)
    assert left >= 0
    share, extra = divmod(left, count)
    return [(name, b"v" * (share + (k < extra))) for k, (name, _) in enumerate(fields)]


def kind_header_limits(g: Gen, i: int) -> Case:
    target = g.target()
    body, content_type = g.body(g.rng.randint(0, 100))
    base = g.headers(target, body, content_type)
    base_bytes = sum(
        len(n) + len(v.lstrip(b" \t")) for n, v in base
    )  # the parser drops leading OWS
    lim = g.limits
    variant = g.rng.choice(["bytes_at", "bytes_over", "count_at", "count_over", "one_huge",
                            "megabytes", "many_tiny"])  # fmt: skip
    if variant == "bytes_at":
        extra = _header_fields(g, lim.header_bytes - base_bytes, 4)
        allowed = _accepts(target, 200)
    elif variant == "bytes_over":
        extra = _header_fields(g, lim.header_bytes - base_bytes + 1, 4)
        allowed = frozenset({431})
    elif variant == "count_at":
        extra = _header_fields(g, 600, lim.header_count - len(base))
        allowed = _accepts(target, 200)
    elif variant == "count_over":
        extra = _header_fields(g, 600, lim.header_count - len(base) + 1)
        allowed = frozenset({431})
    elif variant == "one_huge":
        extra = [(b"X-Huge", b"h" * (lim.header_bytes + HEAD_SLACK_BYTES + 10))]
        allowed = frozenset({431})
    elif variant == "megabytes":
        extra = [(f"X-M{n}".encode(), b"m" * 60_000) for n in range(40)]
        allowed = frozenset({431})
    else:
        extra = [(b"A", b"") for _ in range(g.rng.randint(lim.header_count + 1, 5000))]
        allowed = frozenset({431})
    data = request("POST", target.path, base + extra, body)
    return Case(i, "header_limits", [data], [Req("POST", allowed, body=body)], note=variant)


def kind_header_malformed(g: Gen, i: int) -> Case:
    """Lines that break the header grammar, and header injection (CR/LF inside a value)."""
    target = g.target()
    body, content_type = g.body(g.rng.randint(0, 100))
    headers = g.headers(target, body, content_type)
    variant = g.rng.choice([
        "lf_only", "obs_fold", "space_before_colon", "empty_name", "nul_in_value", "latin1_value",
        "utf8_value", "utf8_name", "ctl_in_value", "no_colon", "inject_header", "inject_smuggle",
        "inject_cl", "bare_cr", "long_name", "empty_value", "no_host", "two_hosts", "tab_value",
        "xff_garbage", "weird_content_type", "dollar_dot_names", "ows_beside_latin1",
    ])  # fmt: skip
    fine = _accepts(target, 200)
    allowed, extra_answers = DOCUMENTED, False
    insert: list[tuple[bytes, bytes]] = []
    if variant == "lf_only":
        data = request("POST", target.path, headers, b"").replace(b"\r\n", b"\n") + body
    else:
        if variant == "obs_fold":
            insert = [(b"X-Folded", b"first\r\n  second")]
        elif variant == "space_before_colon":
            insert = [(b"X-Space ", b"v")]
        elif variant == "empty_name":
            insert = [(b"", b"v")]
        elif variant == "nul_in_value":
            insert = [(b"X-Nul", b"a\x00b")]
        elif variant == "latin1_value":
            insert, allowed = [(b"X-Latin", b"caf\xe9 \xff")], fine
        elif variant == "utf8_value":
            insert, allowed = [(b"X-Utf8", "ünïcödé 😀 \u202e".encode())], fine
        elif variant == "utf8_name":
            insert = [("X-Ünï".encode(), b"v")]
        elif variant == "ctl_in_value":
            insert = [(b"X-Ctl", b"a\x01\x1b[31mred\x7f")]
        elif variant == "no_colon":
            insert = [(b"X-No-Colon-Here" + b"\r\nX-After", b"v")]
        elif variant == "inject_header":
            insert, allowed = [(b"X-Inject", b"a\r\nX-Injected: yes")], fine
        elif variant == "inject_smuggle":
            smuggled = request("GET", "/", [(b"Host", b"x")])
            insert = [(b"X-Inject", b"a\r\n\r\n" + smuggled[:-4])]
            extra_answers = True
        elif variant == "inject_cl":
            insert = [(b"X-Inject", b"a\r\nContent-Length: 0")]
            extra_answers = True
        elif variant == "bare_cr":
            insert = [(b"X-Cr", b"a\rb")]
        elif variant == "long_name":
            insert, allowed = [(b"X-" + b"n" * 10_000, b"v")], fine
        elif variant == "empty_value":
            insert, allowed = [(b"X-Empty", b"")], fine
        elif variant == "no_host":
            headers, allowed = [h for h in headers if h[0] != b"Host"], fine
        elif variant == "two_hosts":
            insert = [(b"Host", b"other.invalid")]
        elif variant == "tab_value":
            insert, allowed = [(b"X-Tab", b"\ta\tb\t")], fine
        elif variant == "xff_garbage":
            value = g.rng.choice(
                [b"not an ip", b"1.2.3.4, ::1, garbage", b"999.1.1.1", b"x" * 5000]
            )
            insert, allowed = [(b"X-Forwarded-For", value)], fine
        elif variant == "ows_beside_latin1":
            # whitespace around values (the signature's too) beside a value that is not UTF-8,
            # which sends the delivery through the forwarder's stricter client: a 200 must
            # still be deliverable
            headers = [h for h in headers if h[0] not in {b"Content-Type", b"X-Service-Signature"}]
            if target.secret is not None:
                signed = g.signature(target.secret, body, g.rng.choice(["plain", "prefixed"]))
                headers.append((b"X-Service-Signature", signed.encode() + b" \t "))
            insert = [(b"Content-Type", b"text/plain; charset=\xff"), (b"X-Padded", b"\t a b  ")]
            allowed = fine
        elif variant == "weird_content_type":
            headers = [h for h in headers if h[0] != b"Content-Type"]
            value = g.rng.choice([b"", b"application/json; charset=\xff", b";;;", b"a" * 3000,
                                  "text/plain; charset=utf-8; ä=😀".encode()])  # fmt: skip
            insert, allowed = [(b"Content-Type", value)], fine
        else:
            insert = [
                (b"X-Has.Dot", b"1"),
                (b"$where", b"1"),
                (b"X-$", b"{}"),
                (b"__proto__", b"x"),
            ]
            allowed = fine
        at = g.rng.randint(1, len(headers))
        data = request("POST", target.path, headers[:at] + insert + headers[at:], body)
    reframed = variant in {"inject_smuggle", "inject_cl"}  # the blank line or length moved
    req = Req("POST", allowed, body=None if reframed else body, any_body=reframed)
    return Case(
        i, "header_malformed", [data], [req], extra_answers=extra_answers, note=variant,
        timeout=10.0,
    )  # fmt: skip


def kind_duplicates(g: Gen, i: int) -> Case:
    target = g.target()
    body, content_type = g.body(g.rng.randint(1, 300))
    headers = g.headers(target, body, content_type)
    variant = g.rng.choice(["content_type", "signature", "user_agent", "content_length_same",
                            "transfer_encoding", "host", "custom_many"])  # fmt: skip
    allowed = _accepts(target, 200)
    if variant == "content_type":
        headers.append((b"Content-Type", b"text/plain"))
    elif variant == "signature":
        signature = [h for h in headers if h[0] == b"X-Service-Signature"]
        headers += signature or [(b"X-Service-Signature", b"abc")]
        allowed = _accepts(target, 401 if target.secret else 200)
    elif variant == "user_agent":
        headers += [(b"User-Agent", b"a"), (b"user-agent", b"b"), (b"USER-AGENT", b"c")]
    elif variant == "content_length_same":
        headers.append((b"Content-Length", str(len(body)).encode()))
        allowed = frozenset({400})
    elif variant == "transfer_encoding":
        headers = [h for h in headers if h[0] != b"Content-Length"]
        headers += [(b"Transfer-Encoding", b"chunked"), (b"Transfer-Encoding", b"chunked")]
        data = request("POST", target.path, headers, chunked(body, g.rng) + b"\r\n")
        req = Req("POST", allowed | {400}, body=body)
        return Case(i, "duplicates", [data], [req], note=variant)
    elif variant == "host":
        headers.append((b"Host", b"127.0.0.1"))
        allowed = allowed | {400}
    else:
        headers += [(b"X-Many", str(n).encode()) for n in range(50)]
    data = request("POST", target.path, headers, body)
    return Case(i, "duplicates", [data], [Req("POST", allowed, body=body)], note=variant)


def kind_upgrade(g: Gen, i: int) -> Case:
    target = g.target()
    variant = g.rng.choice(["websocket_body", "h2c_body", "websocket_chunked", "websocket_empty",
                            "upgrade_without_connection", "connection_without_upgrade",
                            "keepalive_upgrade_body"])  # fmt: skip
    with_body = variant.endswith(("body", "chunked")) or variant.startswith(("upgrade", "conn"))
    body, content_type = g.body(g.rng.randint(1, 300)) if with_body else (b"", "text/plain")
    headers = g.headers(target, body, content_type)
    upgrade = [(b"Upgrade", b"websocket"), (b"Connection", b"Upgrade"),
               (b"Sec-WebSocket-Key", b"dGhlIHNhbXBsZSBub25jZQ=="),
               (b"Sec-WebSocket-Version", b"13")]  # fmt: skip
    payload = body
    allowed = _accepts(target, 400)
    if variant == "h2c_body":
        upgrade = [(b"Upgrade", b"h2c"), (b"Connection", b"Upgrade, HTTP2-Settings"),
                   (b"HTTP2-Settings", b"AAMAAABkAAQ")]  # fmt: skip
    elif variant == "websocket_chunked":
        headers = [h for h in headers if h[0] != b"Content-Length"]
        headers.append((b"Transfer-Encoding", b"chunked"))
        payload = chunked(body, g.rng) + b"\r\n"
    elif variant == "websocket_empty":
        allowed = _accepts(target, 200)
    elif variant == "upgrade_without_connection":
        upgrade, allowed = [(b"Upgrade", b"websocket")], _accepts(target, 200)
    elif variant == "connection_without_upgrade":
        upgrade, allowed = [(b"Connection", b"upgrade")], _accepts(target, 200)
    else:
        upgrade = [(b"Upgrade", b"websocket"), (b"Connection", b"keep-alive, Upgrade")]
    data = request("POST", target.path, headers + upgrade, payload)
    return Case(i, "upgrade", [data], [Req("POST", allowed, body=body)], note=variant)


def kind_expect(g: Gen, i: int) -> Case:
    target = g.target()
    variant = g.rng.choice(["continue", "continue", "oversize", "unknown_user", "chunked", "other"])
    body, content_type = g.body(g.rng.randint(1, 5000))
    headers = g.headers(target, body, content_type)
    path, allowed, payload = target.path, _accepts(target, 200), body
    if variant == "oversize":
        headers = [h for h in headers if h[0] != b"Content-Length"]
        headers.append((b"Content-Length", str(g.limits.body + 1).encode()))
        allowed = _accepts(target, 413)
        payload = b""  # never sent: the answer comes first
    elif variant == "unknown_user":
        path, allowed = f"/w/{g.name()}/{target.webhook}", frozenset({403})
    elif variant == "chunked":
        headers = [h for h in headers if h[0] != b"Content-Length"]
        headers.append((b"Transfer-Encoding", b"chunked"))
        payload = chunked(body, g.rng) + b"\r\n"
    expectation = b"100-continue" if variant != "other" else b"something-else"
    head = request("POST", path, [*headers, (b"Expect", expectation)])
    allowed = allowed | {417} if variant == "other" else allowed
    return Case(
        i, "expect", [head, payload], [Req("POST", allowed, body=body)],
        expect_continue=variant != "other", note=variant,
    )  # fmt: skip


def kind_size(g: Gen, i: int) -> Case:
    target = g.target()
    limit = g.limits.body
    variant = g.rng.choice(["at_limit", "declared_over", "chunked_at_limit", "chunked_over",
                            "declared_huge", "declared_over_then_next"])  # fmt: skip
    if variant == "declared_over_then_next":  # the refused body is skipped, the next answered
        body = g.rng.randbytes(limit + 1)
        headers = [(b"Host", b"x"), (b"Content-Length", str(len(body)).encode())]
        after, req = _post(g, target)
        data = request("POST", target.path, headers, body) + after
        first = Req("POST", _accepts(target, 413))
        return Case(i, "size", [data], [first, req], timeout=60.0, note=variant)
    if variant == "declared_over" or variant == "declared_huge":
        declared = limit + 1 if variant == "declared_over" else 10**15
        headers = [(b"Host", b"x"), (b"Content-Length", str(declared).encode())]
        data = request("POST", target.path, headers, b"x" * 1000)  # the rest is never sent
        return Case(i, "size", [data], [Req("POST", _accepts(target, 413))], note=variant)
    size = limit if variant.endswith("at_limit") else limit + g.rng.randint(1, 100_000)
    body = g.rng.randbytes(size)
    if variant == "at_limit":
        data = request(
            "POST", target.path, g.headers(target, body, "application/octet-stream"), body
        )
        req = Req("POST", _accepts(target, 200), body=body)
    else:
        headers = g.headers(target, body, "application/octet-stream", length=False)
        headers.append((b"Transfer-Encoding", b"chunked"))
        data = request("POST", target.path, headers, chunked(body, g.rng) + b"\r\n")
        ok = variant == "chunked_at_limit"
        req = Req("POST", _accepts(target, 200 if ok else 413), body=body if ok else None)
    return Case(i, "size", [data], [req], timeout=60.0, note=variant)


def kind_chunked(g: Gen, i: int) -> Case:
    target = g.target()
    body, content_type = g.body(max(1, g.size()))
    headers = g.headers(target, body, content_type, length=False)
    te = [(b"Transfer-Encoding", b"chunked")]
    variant = g.rng.choice([
        "valid", "valid", "extensions", "trailers", "upper_hex", "leading_zeros", "empty",
        "bad_size", "negative", "overflow", "missing_crlf", "data_longer", "no_last_chunk",
        "with_content_length", "gzip_chunked", "chunked_gzip", "identity", "space_in_size",
    ])  # fmt: skip
    fine, broken = _accepts(target, 200), _accepts(target, 400)
    allowed, payload = fine, chunked(body, g.rng) + b"\r\n"
    then: Literal["wait", "half_close"] = "wait"
    no_answer: str | None = None
    req_body: bytes | None = body
    if variant == "extensions":
        payload = chunked(body, g.rng, extensions=True) + b"\r\n"
    elif variant == "trailers":
        payload = chunked(body, g.rng) + b"X-Trailer: t\r\nX-Checksum: 1\r\n\r\n"
        te.append((b"Trailer", b"X-Trailer, X-Checksum"))
    elif variant == "upper_hex":
        payload = f"{len(body):X}".encode() + b"\r\n" + body + b"\r\n0\r\n\r\n"
    elif variant == "leading_zeros":
        payload = f"{len(body):08x}".encode() + b"\r\n" + body + b"\r\n0\r\n\r\n"
    elif variant == "empty":
        payload, req_body = b"0\r\n\r\n", b""
        headers = g.headers(target, b"", content_type, length=False)
    elif variant == "bad_size":
        payload, allowed, req_body = b"zz\r\n" + body + b"\r\n0\r\n\r\n", broken, None
    elif variant == "negative":
        payload, allowed, req_body = b"-5\r\nabcde\r\n0\r\n\r\n", broken, None
    elif variant == "overflow":
        payload, allowed, req_body = b"fffffffffffffffffff\r\nab\r\n0\r\n\r\n", broken, None
    elif variant == "missing_crlf":
        payload, allowed, req_body = b"3\r\nabcdef\r\n0\r\n\r\n", broken, None
    elif variant == "data_longer":
        payload, allowed, req_body = b"2\r\nabcd\r\n0\r\n\r\n", broken, None
    elif variant == "no_last_chunk":
        payload = f"{len(body) + 10:x}".encode() + b"\r\n" + body
        allowed, req_body, then, no_answer = broken, None, "half_close", "incomplete_at_eof"
    elif variant == "with_content_length":
        te.append((b"Content-Length", str(len(payload)).encode()))
        allowed, req_body = broken, None
    elif variant == "gzip_chunked":
        te = [(b"Transfer-Encoding", b"gzip, chunked")]
        allowed = fine | broken
    elif variant == "chunked_gzip":
        te = [(b"Transfer-Encoding", b"chunked, gzip")]
        allowed, req_body = fine | broken, None
    elif variant == "identity":
        te = [(b"Transfer-Encoding", b"identity")]
        allowed, req_body = fine | broken, None
    else:
        payload = f"{len(body):x} ".encode() + b"\r\n" + body + b"\r\n0\r\n\r\n"
        allowed = fine | broken
    data = request("POST", target.path, headers + te, payload)
    req = Req("POST", allowed, body=req_body, any_body=req_body is None and 200 in allowed)
    return Case(i, "chunked", [data], [req], then=then, no_answer=no_answer, note=variant,
                timeout=30.0)  # fmt: skip


def kind_length(g: Gen, i: int) -> Case:
    """A ``Content-Length`` that lies or is not a length."""
    target = g.target()
    body, content_type = g.body(g.rng.randint(2, 2000))
    headers = [h for h in g.headers(target, body, content_type) if h[0] != b"Content-Length"]
    variant = g.rng.choice(["shorter", "shorter", "longer", "negative", "not_a_number",
                            "float", "hex", "plus", "spaces", "empty", "huge", "two_differ",
                            "two_with_chunked", "leading_zeros", "comma_list"])  # fmt: skip
    broken = frozenset({400})
    case = Case(i, "length", [], [], note=variant, timeout=10.0)
    if variant == "shorter":
        cut = g.rng.randint(0, len(body) - 1)
        framed = body[:cut]
        headers = g.headers(target, framed, content_type)  # signed as framed
        tail = b"{" + body[cut:]  # never the start of a request line: answered 400
        case.parts = [request("POST", target.path, headers, framed + tail)]
        case.requests = [Req("POST", _accepts(target, 200, 400), body=framed)]
        case.extra_answers = True
        return case
    if variant == "longer":
        headers.append((b"Content-Length", str(len(body) + g.rng.randint(1, 1000)).encode()))
        case.parts = [request("POST", target.path, headers, body)]
        case.requests = [Req("POST", _accepts(target, 400))]
        case.then, case.no_answer = "half_close", "incomplete_at_eof"
        return case
    values = {
        "negative": [b"-1"],
        "not_a_number": [b"abc"],
        "float": [b"1.5"],
        "hex": [b"0x10"],
        "plus": [b"+" + str(len(body)).encode()],
        "spaces": [f" {len(body)} ".encode()],
        "empty": [b""],
        "huge": [b"9" * 40],
        "two_differ": [str(len(body)).encode(), b"1"],
        "two_with_chunked": [str(len(body)).encode(), str(len(body)).encode()],
        "leading_zeros": [f"000{len(body)}".encode()],
        "comma_list": [f"{len(body)}, {len(body)}".encode()],
    }[variant]
    headers += [(b"Content-Length", v) for v in values]
    payload = body
    allowed: frozenset[int] = broken
    if variant == "two_with_chunked":
        headers.append((b"Transfer-Encoding", b"chunked"))
        payload = chunked(body, g.rng) + b"\r\n"
    if variant in {"spaces", "leading_zeros"}:
        allowed = _accepts(target, 200, 400)
    if variant in {"comma_list", "huge"}:
        allowed = _accepts(target, 400, 413)
    case.parts = [request("POST", target.path, headers, payload)]
    ok = 200 in allowed
    case.requests = [Req("POST", allowed, body=body if ok else None)]
    return case


def kind_slow(g: Gen, i: int) -> Case:
    """A sender that dribbles its request a byte at a time, and one that hangs up midway."""
    target = g.target()
    body, content_type = g.body(g.rng.randint(0, 120))
    data = request("POST", target.path, g.headers(target, body, content_type), body)
    variant = g.rng.choice(["complete", "complete", "close_in_body", "close_in_head"])
    pause = g.rng.choice([0.0005, 0.001, 0.003])
    if variant == "complete":
        return Case(i, "slow", [bytes([b]) for b in data], [Req("POST", _accepts(target, 200),
                    body=body)], pause=pause, note=variant, timeout=30.0)  # fmt: skip
    head_end = data.index(b"\r\n\r\n") + 4
    stop = (
        g.rng.randint(head_end, len(data) - 1)
        if variant == "close_in_body" and body
        else (g.rng.randint(1, head_end - 1))
    )
    parts = [bytes([b]) for b in data[:stop]]
    return Case(i, "slow", parts, [Req("POST", DOCUMENTED)], pause=pause, then="close",
                no_answer="sender_closed", note=variant, timeout=30.0)  # fmt: skip


def kind_pipelined(g: Gen, i: int) -> Case:
    """Requests written back to back on one connection (2-5, one in ten times 20-60, some with
    bodies the server refuses unread): answered one by one, in order."""
    parts: list[bytes] = []
    requests: list[Req] = []
    many = g.rng.random() < 0.1
    for _ in range(g.rng.randint(20, 60) if many else g.rng.randint(2, 5)):
        target = g.target()
        roll = g.rng.random()
        if roll < 0.5:
            data, req = _post(g, target)
            if len(req.body or b"") > 100_000:
                data, req = _post(g, target)
        elif roll < 0.6:  # refused before its body is read: the parser must still skip it
            body = g.rng.randbytes(g.rng.randint(1, 5000))
            headers = [(b"Host", b"x"), (b"Content-Length", str(len(body)).encode())]
            method = g.rng.choice(["GET", "PUT", "DELETE"])
            data, req = request(method, target.path, headers, body), Req(method, frozenset({405}))
        elif roll < 0.7:
            data, req = request("GET", target.path, [(b"Host", b"x")]), Req("GET", frozenset({405}))
        elif roll < 0.8:
            data = request("HEAD", target.path, [(b"Host", b"x")])
            req = Req("HEAD", frozenset({405}))
        elif roll < 0.9:
            body = b"{}"
            path = f"/w/{g.name()}/{target.webhook}"
            headers = [(b"Host", b"x"), (b"Content-Length", b"2")]
            data, req = request("POST", path, headers, body), Req("POST", frozenset({403}))
        else:
            data, req = request("GET", "/nowhere", [(b"Host", b"x")]), Req("GET", frozenset({404}))
        parts.append(data)
        requests.append(req)
    joined = b"".join(parts)
    return Case(i, "pipelined", [joined], requests, timeout=60.0, note=str(len(requests)))


def kind_version(g: Gen, i: int) -> Case:
    target = g.target()
    body, content_type = g.body(g.rng.randint(0, 500))
    headers = g.headers(target, body, content_type)
    variant = g.rng.choice(["1.0", "1.0_keepalive", "1.0_no_length", "0.9", "1.2", "2.0", "9.9",
                            "lower", "preface", "leading_crlf"])  # fmt: skip
    fine = _accepts(target, 200)
    if variant == "1.0":
        data, req = (
            request("POST", target.path, headers, body, b"HTTP/1.0"),
            Req("POST", fine, body),
        )
    elif variant == "1.0_keepalive":
        headers.append((b"Connection", b"keep-alive"))
        data, req = (
            request("POST", target.path, headers, body, b"HTTP/1.0"),
            Req("POST", fine, body),
        )
    elif variant == "1.0_no_length":
        headers = g.headers(target, b"", content_type, length=False)
        data = request("POST", target.path, headers, b"", b"HTTP/1.0")
        req = Req("POST", fine | {400}, body=b"")
    elif variant == "0.9":  # the parser takes a request line without a version: no body
        data = f"POST {target.path}\r\n\r\n".encode()
        req = Req("POST", _accepts(target, 200, 400, 401), body=b"")
    elif variant == "preface":
        data, req = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Req("PRI", frozenset({400}))
    elif variant == "leading_crlf":
        data = b"\r\n\r\n" + request("POST", target.path, headers, body)
        req = Req("POST", fine | {400}, body=body)
    else:
        version = {"1.2": b"HTTP/1.2", "2.0": b"HTTP/2.0", "9.9": b"HTTP/9.9", "lower": b"http/1.1"}
        data = request("POST", target.path, headers, body, version[variant])
        req = Req("POST", fine | {400}, body=body)
    return Case(i, "version", [data], [req], note=variant, timeout=10.0)


def kind_garbage(g: Gen, i: int) -> Case:
    variant = g.rng.choice(["random", "tls_hello", "nothing", "crlf_only", "nul", "json"])
    broken = [Req("-", frozenset({400}))]
    if variant == "nothing":
        return Case(i, "garbage", [b""], [Req("-", frozenset())], then="half_close",
                    no_answer="nothing_sent", note=variant)  # fmt: skip
    if variant == "crlf_only":
        return Case(i, "garbage", [b"\r\n" * 10], [Req("-", frozenset({400}))], then="half_close",
                    no_answer="incomplete_at_eof", note=variant)  # fmt: skip
    data = {
        "random": bytes([g.rng.randint(0x80, 0xFF)]) + g.rng.randbytes(g.rng.randint(1, 3000)),
        "tls_hello": bytes.fromhex("160301020001") + g.rng.randbytes(500),
        "nul": b"\x00" * 100,
        "json": b'{"not": "http"}\r\n\r\n',
    }[variant]
    return Case(i, "garbage", [data], broken, note=variant, timeout=10.0)


KindMaker = Callable[[Gen, int], Case]
PROVIDER_VARIANTS = (
    "valid", "tampered", "stale", "several", "garbage", "missing", "wrong_prefix", "huge",
    "handshake", "forged_handshake", "get", "get_forged",
)  # fmt: skip


def _hex_mac(secret: str, payload: bytes) -> str:
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def _b64_mac(secret: str, payload: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), payload, hashlib.sha256).digest()).decode()


def _provider_headers(
    g: Gen, target: Target, body: bytes, variant: str
) -> list[tuple[bytes, bytes]]:
    """The signature headers of ``target``'s provider for ``body``, spoiled as ``variant`` says."""
    secret = target.secret or ""
    now = int(g.now)
    t = now - 3600 if variant == "stale" else now
    signed = body + b"x" if variant == "tampered" else body
    kind = target.verification
    if kind == "stripe":
        good = _hex_mac(secret, f"{t}.".encode() + signed)
        value = {
            "several": f"t={t},v1={'0' * 64},v1={good},v0={good}",
            "wrong_prefix": f"t={t},v0={good}",
        }.get(variant, f"t={t},v1={good}")
        headers = [(b"Stripe-Signature", value.encode())]
    elif kind == "slack":
        good = _hex_mac(secret, f"v0:{t}:".encode() + signed)
        prefix = "v1=" if variant == "wrong_prefix" else "v0="
        headers = [(b"X-Slack-Signature", f"{prefix}{good}".encode()),
                   (b"X-Slack-Request-Timestamp", str(t).encode())]  # fmt: skip
    elif kind == "x":
        prefix = "sha1=" if variant == "wrong_prefix" else "sha256="
        headers = [
            (b"x-twitter-webhooks-signature", f"{prefix}{_b64_mac(secret, signed)}".encode())
        ]
    else:  # github, meta: X-Hub-Signature-256
        prefix = "sha1=" if variant == "wrong_prefix" else "sha256="
        value = f"{prefix}{_hex_mac(secret, signed)}"
        if variant == "several":
            value = f"sha256={'0' * 64}, {value}"
        headers = [(b"X-Hub-Signature-256", value.encode())]
    if variant == "missing":
        return []
    if variant == "garbage":
        return [(name, g.rng.choice([b"", b"t=,v1=", b"sha256=", b"v0=zz", "ä😀".encode(),
                                      g.rng.randbytes(24).hex().encode()])) for name, _ in headers]  # fmt: skip
    if variant == "huge":
        return [(name, value + b"," + b"v1=" * 2000) for name, value in headers]
    return headers


def kind_provider(g: Gen, i: int) -> Case:
    """A webhook verifying a provider's signature (Stripe, GitHub, Slack, Meta, X): correctly
    signed requests, spoiled signatures, handshakes (Slack's signed POST, Meta's and X's GET)
    and forged ones. A verified request and, in ``record`` mode, any request is a 200 delivered
    to the destination; a handshake's 200 is its answer and is never forwarded."""
    if not g.providers:
        return kind_valid(g, i)
    target = g.rng.choice(g.providers)
    variant = g.rng.choice(PROVIDER_VARIANTS)
    record = target.mode == "record"
    if variant in {"get", "get_forged"}:
        if target.verification == "meta":
            token = target.verify_token if variant == "get" else "not-the-token"
            query = f"hub.mode=subscribe&hub.verify_token={token}&hub.challenge={g.name(10)}"
        elif target.verification == "x":
            query = "crc_token=" + (g.name(16) if variant == "get" else "<script>")
        else:  # no GET handshake: the 405 every GET gets
            data = request("GET", target.path + "?hub.mode=subscribe", [(b"Host", b"127.0.0.1")])
            return Case(i, "provider", [data], [Req("GET", frozenset({405}))], note="get_405")
        data = request("GET", f"{target.path}?{query}", [(b"Host", b"127.0.0.1")])
        allowed = frozenset({200}) if variant == "get" else frozenset({401})
        req = Req("GET", allowed, handshake=True)
        return Case(i, "provider", [data], [req], note=f"{target.verification}_{variant}")
    if variant in {"handshake", "forged_handshake"} and target.verification == "slack":
        raw = json.dumps(
            {"type": "url_verification", "token": "x", "challenge": g.name(20)}
        ).encode()
        spoil = "valid" if variant == "handshake" else "tampered"
        headers = [(b"Host", b"127.0.0.1"), (b"Content-Type", b"application/json"),
                   (b"Content-Length", str(len(raw)).encode()),
                   *_provider_headers(g, target, raw, spoil)]  # fmt: skip
        allowed = frozenset({200}) if variant == "handshake" else frozenset({401})
        data = request("POST", target.path, headers, raw)
        return Case(i, "provider", [data], [Req("POST", allowed, handshake=True)],
                    note=f"slack_{variant}")  # fmt: skip
    body = json.dumps({"id": f"evt_{g.name(12)}", "n": g.rng.randint(0, 10**6),
                       "text": g.text(g.rng.randint(0, 80))}).encode()  # fmt: skip
    spoil = (
        "valid" if variant in {"handshake", "forged_handshake", "get", "get_forged"} else variant
    )
    headers = [(b"Host", b"127.0.0.1"), (b"Content-Type", b"application/json"),
               (b"Content-Length", str(len(body)).encode()),
               *_provider_headers(g, target, body, spoil)]  # fmt: skip
    timestamped = target.verification in {"stripe", "slack"}
    # several signatures in one header is Stripe's format (any v1 may match); GitHub's and Meta's
    # header holds one, so a list there is not theirs (Slack's and X's get one signature)
    several = spoil == "several" and target.verification not in {"github", "meta"}
    verified = spoil == "valid" or several or (spoil == "stale" and not timestamped)
    allowed = frozenset({200}) if verified or record else frozenset({401})
    if spoil == "huge":  # whether the good signature still stands among the junk: the preset's
        allowed = frozenset({200, 401, 431})
    data = request("POST", target.path, headers, body)
    note = f"{target.verification}_{spoil}"
    return Case(i, "provider", [data], [Req("POST", allowed, body=body)], note=note)


KINDS: list[tuple[str, KindMaker, int]] = [
    ("valid", kind_valid, 6),
    ("signature", kind_signature, 3),
    ("method", kind_method, 3),
    ("path", kind_path, 4),
    ("names", kind_names, 4),
    ("header_limits", kind_header_limits, 1),
    ("header_malformed", kind_header_malformed, 4),
    ("duplicates", kind_duplicates, 2),
    ("upgrade", kind_upgrade, 2),
    ("expect", kind_expect, 2),
    ("chunked", kind_chunked, 4),
    ("length", kind_length, 4),
    ("slow", kind_slow, 2),
    ("pipelined", kind_pipelined, 2),
    ("version", kind_version, 2),
    ("garbage", kind_garbage, 1),
    ("provider", kind_provider, 3),
]
"""(kind, maker, weight): the cycle of input kinds, each as many times as its weight."""
_CYCLE = [maker for _, maker, weight in KINDS for _ in range(weight)]
SIZE_EVERY = 97
"""Every ``SIZE_EVERY``-th input is a ``kind_size`` one (4.5 MB bodies: kept rare)."""


def case(
    targets: list[Target], seed: int, index: int, limits: Limits | None = None,
    now: float | None = None,
) -> Case:  # fmt: skip
    """Input ``index`` of the run with ``seed``: the same bytes every time, but for the signed
    timestamps of provider inputs, which are ``now`` (the sending time by default)."""
    clock = time.time() if now is None else now
    g = Gen(random.Random(f"{seed}:{index}"), targets, limits or Limits(), clock)
    if index % SIZE_EVERY == SIZE_EVERY // 2:
        return kind_size(g, index)
    step = random.Random(f"{seed}:cycle").randrange(len(_CYCLE))
    return _CYCLE[(index + step) % len(_CYCLE)](g, index)


# --- the exchange -------------------------------------------------------------------------------


class _Truncated(Exception):
    """The connection ended inside an answer."""


async def _read_answer(
    reader: asyncio.StreamReader, head_only: bool, seen_continue: Callable[[], None]
) -> Answer | None:
    """The next final answer (interim 1xx answers are counted through ``seen_continue``);
    ``None`` at the end of the stream before any byte of an answer."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                return None
            raise _Truncated(exc.partial[:200].decode("latin-1")) from None
        status_line, *lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ")[1])
        if 100 <= status < 200:
            seen_continue()
            continue
        break
    headers: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    try:
        if head_only or status in (204, 304):
            body = b""
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = await _read_chunked(reader)
        elif "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        else:
            body = await reader.read()
    except asyncio.IncompleteReadError as exc:
        raise _Truncated(f"{status_line} body cut after {len(exc.partial)} bytes") from None
    return Answer(status, head, headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    out: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailer fields
            return b"".join(out)
        out.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def exchange(host: str, port: int, case: Case) -> Outcome:
    """Write ``case`` on a new connection and read its answers."""
    outcome = Outcome()
    reader, writer = await asyncio.open_connection(host, port, limit=4 * 1024 * 1024)
    answered = asyncio.Event()
    continued = asyncio.Event()

    def seen_continue() -> None:
        outcome.continues += 1
        continued.set()

    async def send() -> None:
        parts = case.parts
        with contextlib.suppress(ConnectionError, OSError):
            if case.expect_continue:
                writer.write(parts[0])
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):  # as curl waits
                        await _first(continued.wait(), answered.wait())
                if answered.is_set():
                    return
                parts = parts[1:]
            for k, part in enumerate(parts):
                if k and case.pause:
                    await asyncio.sleep(case.pause)
                writer.write(part)
                if len(part) > 65536 or case.pause:
                    await writer.drain()
            await writer.drain()
            if case.then == "half_close" and writer.can_write_eof():
                writer.write_eof()

    sending = asyncio.create_task(send())
    try:
        if case.then == "close":
            await sending
            outcome.ended = "not_read"
            return outcome
        await _read_answers(reader, case, outcome, answered, seen_continue)
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sending
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
    return outcome


async def _read_answers(
    reader: asyncio.StreamReader,
    case: Case,
    outcome: Outcome,
    answered: asyncio.Event,
    seen_continue: Callable[[], None],
) -> None:
    wanted = len(case.requests)
    try:
        async with asyncio.timeout(case.timeout):
            while len(outcome.answers) < wanted or case.extra_answers:
                at = len(outcome.answers)
                head_only = at < wanted and case.requests[at].method == "HEAD"
                if at >= wanted:  # after the requests: answers to the bytes that followed
                    try:
                        async with asyncio.timeout(3.0):
                            answer = await _read_answer(reader, False, seen_continue)
                    except TimeoutError:
                        break
                else:
                    answer = await _read_answer(reader, head_only, seen_continue)
                if answer is None:
                    outcome.ended = "eof"
                    return
                outcome.answers.append(answer)
                answered.set()
    except TimeoutError:
        outcome.ended = "timeout"
    except _Truncated as exc:
        outcome.ended, outcome.error = "truncated", str(exc)
    except (ConnectionError, OSError) as exc:
        outcome.ended, outcome.error = "reset", type(exc).__name__


async def _first(*waits: Any) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


# --- judging ------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What both fuzzers count (``fuzz_api``'s report is one too)."""

    seed: int
    n: int
    inputs: int = 0
    requests: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    five_xx: int = 0
    non_json_errors: int = 0
    unexpected_status: int = 0
    offending: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    duration: float = 0.0

    def counts(self) -> dict[str, Any]:
        """The shared part of a fuzzer's result."""
        return {
            "seed": self.seed, "n": self.n, "inputs": self.inputs, "requests": self.requests,
            "duration_s": round(self.duration, 1),
            "by_status": dict(sorted(self.by_status.items())),
            "5xx": self.five_xx, "non_json_errors": self.non_json_errors,
            "unexpected_status": self.unexpected_status, "offending": self.offending,
            "examples": self.examples,
        }  # fmt: skip


@dataclass
class Report(Tally):
    by_kind: Counter[str] = field(default_factory=Counter)
    no_answer_allowed: Counter[str] = field(default_factory=Counter)
    no_answer_offending: int = 0
    bad_success_bodies: int = 0
    continues: int = 0
    accepted: list[dict[str, Any]] = field(default_factory=list)
    handshakes: int = 0
    """Handshakes answered 200 (their answer, not an accepted event: never forwarded)."""

    def offence(self, case: Case, reason: str, answer: Answer | None = None) -> None:
        self.offending += 1
        if len(self.examples) < MAX_EXAMPLES:
            example = {"index": case.index, "kind": case.kind, "note": case.note,
                       "reason": reason, "input": case.describe()}  # fmt: skip
            if answer is not None:
                example["answer"] = answer.text()[:500]
            self.examples.append(example)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.counts(),
            "by_kind": dict(sorted(self.by_kind.items())),
            "bad_success_bodies": self.bad_success_bodies,
            "no_answer": {
                "allowed": dict(sorted(self.no_answer_allowed.items())),
                "allowed_because": NO_ANSWER_ALLOWED,
                "offending": self.no_answer_offending,
            },
            "continues": self.continues, "accepted": self.accepted,
            "handshakes": self.handshakes,
        }  # fmt: skip


def _error_body_ok(answer: Answer) -> bool:
    if "application/json" not in answer.headers.get("content-type", ""):
        return False
    try:
        body = json.loads(answer.body)
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("error"), str)


def _success_request_id(answer: Answer) -> str | None:
    try:
        body = json.loads(answer.body)
    except ValueError:
        return None
    if not isinstance(body, dict) or set(body) != {"success", "requestId"}:
        return None
    request_id = body["requestId"]
    ok = body["success"] is True and isinstance(request_id, str) and request_id.startswith("req_")
    return request_id if ok else None


def judge(case: Case, outcome: Outcome, report: Report, *, ingest: bool = True) -> None:
    """Count ``outcome`` into ``report`` (module docstring); with ``ingest=False`` (another
    service's server) a 200 is not held to the receiving endpoint's answer."""
    report.inputs += 1
    report.requests += len(case.requests)
    report.by_kind[case.kind] += 1
    report.continues += outcome.continues
    for at, answer in enumerate(outcome.answers):
        req = case.requests[at] if at < len(case.requests) else None
        report.by_status[str(answer.status)] += 1
        if answer.status >= 500:
            report.five_xx += 1
            report.offence(case, f"answer {at}: {answer.status}", answer)
        has_body = req is None or req.method != "HEAD"  # a HEAD answer has no body by rule
        if answer.status >= 400 and has_body and not _error_body_ok(answer):
            report.non_json_errors += 1
            report.offence(case, f"answer {at}: error body is not JSON", answer)
        allowed = req.allowed if req is not None else frozenset({200, 400, 404, 405, 431})
        if answer.status not in allowed:
            report.unexpected_status += 1
            report.offence(case, f"answer {at}: {answer.status} not in {sorted(allowed)}", answer)
        if answer.status == 200 and ingest:
            if req is not None and req.handshake:
                report.handshakes += 1
            else:
                _accepted(case, req, answer, report)
    missing = len(case.requests) - len(outcome.answers)
    if missing > 0:
        if case.no_answer is not None:
            report.no_answer_allowed[case.no_answer] += missing
        else:
            report.no_answer_offending += missing
            why = outcome.ended + (f" ({outcome.error})" if outcome.error else "")
            report.offence(case, f"{missing} of {len(case.requests)} requests unanswered: {why}")


def _accepted(case: Case, req: Req | None, answer: Answer, report: Report) -> None:
    request_id = _success_request_id(answer)
    if request_id is None:
        report.bad_success_bodies += 1
        report.offence(case, "200 body is not {success: true, requestId: req_...}", answer)
        return
    body = req.body if req is not None else None
    report.accepted.append({
        "request_id": request_id, "kind": case.kind, "note": case.note, "index": case.index,
        "sha256": hashlib.sha256(body).hexdigest() if body is not None else None,
        "size": len(body) if body is not None else None,
    })  # fmt: skip


# --- the run ------------------------------------------------------------------------------------


async def warm_up(host: str, port: int, targets: list[Target], timeout: float = 20) -> None:
    """Wait until ingest knows every target (an active one answers a declared-oversize POST
    413, an inactive one 403): a fuzz run's flood of unknown names uses up ingest's MongoDB
    read-through budget, and a target not yet in its view would then look unknown."""
    for target in targets:
        probe = Case(-1, "warm_up", [request("POST", target.path, [
            (b"Host", b"x"), (b"Content-Length", str(10**15).encode()), (b"Connection", b"close"),
        ])], [Req("POST", frozenset())])  # fmt: skip
        wanted = 413 if target.active else 403
        deadline = time.monotonic() + timeout
        while True:
            outcome = await exchange(host, port, probe)
            if [a.status for a in outcome.answers] == [wanted]:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"ingest does not know {target.path} (no {wanted})")
            await asyncio.sleep(0.2)


async def fuzz_ingest(
    base: str,
    targets: list[dict[str, str]],
    n: int,
    seed: int = 0,
    *,
    concurrency: int = 16,
    limits: Limits | None = None,
    responses: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """Send ``n`` inputs to ingest at ``base`` (``http://127.0.0.1:PORT``) against ``targets``
    (``{"path", "secret", "active"}``: at least one active); the counts described in the module
    docstring. ``responses``, when given, receives every answer as ``(label, text)``."""
    parts = urlsplit(base)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    known = [Target.of(t) for t in targets]
    assert any(t.active for t in known), "at least one active target"
    limits = limits or Limits()
    report = Report(seed, n)
    started = time.monotonic()
    await warm_up(host, port, known)
    slots = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        async with slots:
            made = case(known, seed, index, limits)
            try:
                outcome = await exchange(host, port, made)
            except OSError as exc:
                outcome = Outcome(ended="reset", error=f"connect: {type(exc).__name__}")
            judge(made, outcome, report)
            if responses is not None:
                for at, answer in enumerate(outcome.answers):
                    responses.append((f"ingest#{index}.{at} {made.kind}", answer.text()))

    await asyncio.gather(*(one(index) for index in range(n)))
    report.duration = time.monotonic() - started
    report.accepted.sort(key=lambda a: int(a["index"]))
    return report.as_dict()


async def missing_from_kafka(
    bootstrap: str, topic: str, accepted: list[dict[str, Any]]
) -> list[str]:
    """Each accepted input whose event is not on ``topic`` (read from the beginning up to the end
    offsets of the moment of the call; a 200 means Kafka acknowledged it before the answer) or
    whose body differs from what the input framed: one line per problem."""
    from tests.support.kafka import bodies_on_topic

    seen = await bodies_on_topic(bootstrap, topic)
    problems = []
    for item in accepted:
        found = seen.get(item["request_id"])
        if found is None:
            problems.append(f"{item['request_id']} (input {item['index']}, {item['kind']}): "
                            "answered 200, not in Kafka")  # fmt: skip
        elif item["sha256"] is not None and found != item["sha256"]:
            problems.append(f"{item['request_id']} (input {item['index']}, {item['kind']}): "
                            "body in Kafka differs from the body sent")  # fmt: skip
    return problems

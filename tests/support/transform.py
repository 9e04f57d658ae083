"""Requests, limits and code for the transformation sandbox's tests."""

from __future__ import annotations

from hookbay_sandbox import Limits, TransformRequest

LIMITS = Limits(cpu_s=0.5, memory_mb=32, margin_s=5.0)
"""Half a second of CPU keeps spinning tests short; the wide margin keeps a busy test machine
from turning a slow but legal call into a host kill."""

IDENTITY = "addHandler('transform', (request, context) => request)"


def create_request(
    body: object = None,
    *,
    headers: dict[str, str] | None = None,
    query: str = "a=1",
    path: str = "/hooks",
) -> TransformRequest:
    return TransformRequest(
        headers=headers if headers is not None else {"content-type": "application/json"},
        body={"id": "evt_1", "amount": 10} if body is None else body,
        query=query,
        path=path,
    )


def handler(body: str) -> str:
    """``body`` as the handler's body."""
    return f"addHandler('transform', (request, context) => {{ {body} }})"


HOSTILE_CODE: list[tuple[str, str, str, str]] = [
    ("top-level-spin", "while(true){}", "timeout", "CPU time limit"),
    (
        "spin",
        handler("while(true){}"),
        "timeout",
        "CPU time limit",
    ),
    (
        "spin-in-try-catch",
        handler("for(;;){ try { while(true){} } catch (e) {} }"),
        "timeout",
        "CPU time limit",
    ),
    (
        "unbounded-recursion",
        handler("function f(){ return f() + 1 } return f()"),
        "runtime",
        "stack limit",
    ),
    (
        "unbounded-allocation",
        handler("const a = []; for(;;) a.push(new Array(1e6).fill(1))"),
        "memory",
        "memory limit of 32 MiB",
    ),
    (  # the engine's interrupt is polled too rarely here: the host's deadline ends it
        "out-of-memory-caught-in-a-loop",
        handler(
            "for(;;){ try { const a = []; for(;;) a.push(new Array(1e6).fill(1)) } catch (e) {} }"
        ),
        "timeout",
        "",
    ),
    (
        "string-of-512-mib",
        handler("request.body = 'x'.repeat(2 ** 29); return request"),
        "memory",
        "memory limit",
    ),
    (
        "catastrophic-regex",
        handler("return /(a+)+$/.test('a'.repeat(40) + '!')"),
        "timeout",
        "CPU time limit",
    ),
    (
        "json-parse-of-deep-nesting",
        handler("return JSON.parse('['.repeat(1e6))"),
        "runtime",
        "stack limit",
    ),
    (
        "returns-a-cycle",
        handler("const o = {}; o.self = o; request.body = o; return request"),
        "invalid_output",
        "circular",
    ),
    (
        "returns-a-function",
        handler("return () => request"),
        "invalid_output",
        "a function",
    ),
    (
        "returns-undefined",
        handler("request.body = 1"),
        "invalid_output",
        "undefined",
    ),
    (
        "returns-100-mb",
        handler("request.body = 'x'.repeat(100 * 1000 * 1000); return request"),
        "memory",
        "memory limit",
    ),
    (
        "throws-a-string",
        handler("throw 'a string'"),
        "runtime",
        "not an Error: a string",
    ),
    (
        "throws-null",
        handler("throw null"),
        "runtime",
        "not an Error: null",
    ),
    (
        "throws-an-object",
        handler("throw {code: 7}"),
        "runtime",
        'not an Error: {"code":7}',
    ),
    (
        "returns-a-bigint",
        handler("return 10n ** 10n"),
        "invalid_output",
        "bigint",
    ),
    (
        "returns-a-string",
        handler("return 'text'"),
        "invalid_output",
        "not string",
    ),
    (
        "returns-null",
        handler("return null"),
        "invalid_output",
        "not null",
    ),
    (
        "async-handler",
        "addHandler('transform', async (request) => request)",
        "invalid_output",
        "async handlers are not supported",
    ),
]
"""Hostile code: (name, code, the error's kind, a part of its message) — each must end as that
failure, whoever runs it (the sandbox's own tests and the forwarder's end to end)."""

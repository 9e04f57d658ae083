"""Hostile transformations against real workers: each ends as a failure with its reason, and the
pool serves the next call."""

from __future__ import annotations

import pytest

from hookbay_sandbox import TransformPool
from tests.support.transform import HOSTILE_CODE, IDENTITY, create_request, handler

HOSTILE = [pytest.param(code, kind, reason, id=name) for name, code, kind, reason in HOSTILE_CODE]


class TestHostile:
    @pytest.mark.parametrize(("code", "kind", "reason"), HOSTILE)
    async def test_fails_with_its_reason_and_the_pool_keeps_serving(
        self, pool: TransformPool, code: str, kind: str, reason: str
    ) -> None:
        result = await pool.run("mallory", code, create_request(), {})

        assert not result.ok
        assert result.request is None
        assert result.error is not None
        assert result.error.kind == kind, result.error
        assert reason in result.error.message
        after = await pool.run("alice", IDENTITY, create_request(), {})
        assert after.ok, after.error

    async def test_output_over_the_output_limit_is_invalid(self, pool: TransformPool) -> None:
        code = handler("request.body = 'x'.repeat(5000); return request")
        small = pool.limits.__class__(cpu_s=0.5, output_bytes=4096, margin_s=5.0)

        result = await pool.run("mallory", code, create_request(), {}, limits=small)

        assert result.error is not None
        assert result.error.kind == "invalid_output"
        assert "larger than 4096 bytes" in result.error.message

    async def test_the_error_says_where_in_the_code(self, pool: TransformPool) -> None:
        code = (
            "const x = 1;\naddHandler('transform', (request) => {\n  return request.nope.deeper\n})"
        )

        result = await pool.run("mallory", code, create_request(), {})

        assert result.error is not None
        assert result.error.kind == "runtime"
        assert result.error.message.startswith("TypeError")
        assert (result.error.line, result.error.column) == (3, 10)  # where the expression starts

    async def test_syntax_error_has_line_and_column(self, pool: TransformPool) -> None:
        result = await pool.run("mallory", "let a = 1;\nlet b = ;\n", create_request(), {})

        assert result.error is not None
        assert result.error.kind == "syntax"
        assert (result.error.line, result.error.column) == (2, 9)

    async def test_code_without_a_handler_fails(self, pool: TransformPool) -> None:
        result = await pool.run("mallory", "const x = 1", create_request(), {})

        assert result.error is not None
        assert result.error.kind == "runtime"
        assert "addHandler" in result.error.message


class TestIsolation:
    async def test_prototype_pollution_is_invisible_to_the_next_call(
        self, single: TransformPool
    ) -> None:
        polluter = handler(
            "Object.prototype.polluted = 'yes'; Array.prototype.push = null;"
            " JSON.stringify = () => '{}'; globalThis.leak = 1; return request"
        )
        observer = handler(
            "request.body = {polluted: typeof ({}).polluted, leak: typeof globalThis.leak,"
            " push: typeof [].push, stringify: JSON.stringify({a: 1})}; return request"
        )

        first = await single.run("mallory", polluter, create_request(), {})
        second = await single.run("alice", observer, create_request(), {})

        assert first.ok, first.error
        assert second.ok, second.error
        assert second.request is not None
        assert second.request.body == {
            "polluted": "undefined",
            "leak": "undefined",
            "push": "function",
            "stringify": '{"a":1}',
        }

    async def test_no_host_objects_are_reachable(self, pool: TransformPool) -> None:
        names = [
            "require", "process", "fetch", "std", "os", "setTimeout", "setInterval", "XMLHttpRequest",
            "Deno", "Bun", "module", "exports", "print", "scriptArgs", "WebSocket", "importScripts",
        ]  # fmt: skip
        probe = handler(
            f"request.body = Object.fromEntries({names!r}.map(n => [n, typeof globalThis[n]]));"
            " return request"
        )

        result = await pool.run("mallory", probe, create_request(), {})

        assert result.ok, result.error
        assert result.request is not None
        assert result.request.body == dict.fromkeys(names, "undefined")

    async def test_dynamic_import_loads_nothing(self, single: TransformPool) -> None:
        code = handler(
            "let got = 'nothing'; import('os').then(m => { got = m }, e => { got = String(e) });"
            " request.body = {got: typeof got === 'string' ? got : 'a module'}; return request"
        )

        result = await single.run("mallory", code, create_request(), {})

        assert result.ok, result.error
        assert result.request is not None
        assert result.request.body == {"got": "nothing"}

    async def test_pending_promises_never_run_after_the_call(self, single: TransformPool) -> None:
        code = handler("Promise.resolve().then(() => { while (true) {} }); return request")

        first = await single.run("mallory", code, create_request(), {})
        second = await single.run("alice", IDENTITY, create_request(), {})

        assert first.ok, first.error
        assert second.ok, second.error


class TestTampering:
    async def test_replaced_intrinsics_change_only_what_the_code_computes(
        self, pool: TransformPool
    ) -> None:
        code = handler(
            "console.log('kept'); Array.prototype.slice = () => { while (true) {} };"
            " Array.prototype.push = null; JSON.parse = () => ({}); String.prototype.slice = null;"
            " return request"
        )

        result = await pool.run("mallory", code, create_request(), {})

        assert result.ok, result.error
        assert result.logs == ["kept"]
        assert result.request == create_request()

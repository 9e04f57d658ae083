"""The pool's own behaviour with real workers: results, console, env, crashes, fairness, the
workers' confinement."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from hookbay_sandbox import (
    Limits,
    PoolClosed,
    TransformPool,
    TransformRequest,
    TransformResult,
)
from hookbay_sandbox.pool import DEMOTE_AFTER_S
from tests.support.transform import IDENTITY, LIMITS, create_request

SPIN = "addHandler('transform', (request) => { while (true) {} })"
LONG = Limits(cpu_s=20.0, memory_mb=32, margin_s=20.0)
"""For calls killed from outside: the engine's limit must not end them first."""
BUSY_FOR_A_WHILE = (
    "addHandler('transform', (request) => { let x = 0;"
    " for (let i = 0; i < 3e7; i++) { x += i % 7 } request.body = {x}; return request })"
)


async def until(condition: object, what: str) -> None:
    """Wait for ``condition()`` to hold; a test waiting more than a minute is broken."""
    async with asyncio.timeout(60):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.005)


class TestRun:
    async def test_returns_the_transformed_request(self, pool: TransformPool) -> None:
        code = """
        addHandler('transform', (request, context) => {
          request.body.amount_cents = request.body.amount * 100;
          delete request.body.amount;
          request.headers['x-api-key'] = context.env.API_KEY;
          request.path = request.path + '/v2';
          request.query = 'b=2';
          return request;
        });
        """

        result = await pool.run("alice", code, create_request(), {"API_KEY": "k-123"})

        assert result.ok, result.error
        assert result.error is None
        assert result.request == TransformRequest(
            headers={"content-type": "application/json", "x-api-key": "k-123"},
            body={"id": "evt_1", "amount_cents": 1000},
            query="b=2",
            path="/hooks/v2",
        )
        assert result.duration_ms > 0

    async def test_a_text_body_arrives_and_leaves_as_a_string(self, pool: TransformPool) -> None:
        code = "addHandler('transform', (r) => { r.body = r.body.toUpperCase(); return r })"

        result = await pool.run("alice", code, create_request(body="a=1&b=2"), {})

        assert result.request is not None
        assert result.request.body == "A=1&B=2"

    async def test_env_is_read_only(self, pool: TransformPool) -> None:
        code = (
            "addHandler('transform', (r, context) => { 'use strict';"
            " context.env.API_KEY = 'changed'; return r })"
        )

        result = await pool.run("alice", code, create_request(), {"API_KEY": "k"})

        assert result.error is not None
        assert result.error.kind == "runtime"
        assert result.error.message.startswith("TypeError")

    async def test_code_over_the_size_limit_is_refused_without_running(
        self, pool: TransformPool
    ) -> None:
        code = IDENTITY + "//" + "x" * 70_000

        result = await pool.run("alice", code, create_request(), {})

        assert result.error is not None
        assert result.error.kind == "too_large"

    async def test_a_request_of_four_and_a_half_megabytes_passes_through(
        self, pool: TransformPool
    ) -> None:
        body: dict[str, object] = {
            "items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(60_000)]
        }
        body["pad"] = "x" * (4_490_000 - len(json.dumps(body, separators=(",", ":"))))
        assert len(create_request(body=body).to_json()) > 4_490_000
        code = "addHandler('transform', (r) => { r.body.count = r.body.items.length; return r })"

        result = await pool.run("alice", code, create_request(body=body), {})

        assert result.ok, result.error
        assert result.request is not None
        assert result.request.body["count"] == 60_000

    async def test_a_body_given_as_json_text_comes_back_as_json_text(
        self, pool: TransformPool
    ) -> None:
        request = TransformRequest({"a": "b"}, body_json='{"items": [1, 2, 3]}')
        code = "addHandler('transform', (r) => { r.body.items.push(4); return r })"

        result = await pool.run("alice", code, request, {})

        assert result.request is not None
        assert result.request.body_json == '{"items":[1,2,3,4]}'
        assert result.request.body == {"items": [1, 2, 3, 4]}


class TestConsole:
    async def test_lines_are_captured_in_order_with_their_level(self, pool: TransformPool) -> None:
        code = (
            "addHandler('transform', (r) => { console.log('hello', {a: 1}, 2);"
            " console.warn('careful'); console.error(new Error('bad').message); return r })"
        )

        result = await pool.run("alice", code, create_request(), {})

        assert result.logs == ['hello {"a":1} 2', "[warn] careful", "[error] bad"]

    async def test_a_flood_is_cut_at_the_line_bound_and_counted(self, pool: TransformPool) -> None:
        code = "addHandler('transform', (r) => { for (let i = 0; i < 500; i++) console.log(i); return r })"

        result = await pool.run("alice", code, create_request(), {})

        assert result.ok
        assert result.logs[:100] == [str(i) for i in range(100)]
        assert result.logs[100:] == ["… 400 more console line(s) left out"]

    async def test_a_flood_is_cut_at_the_byte_bound(self, pool: TransformPool) -> None:
        code = "addHandler('transform', (r) => { for (let i = 0; i < 50; i++) console.log('y'.repeat(1000)); return r })"

        result = await pool.run("alice", code, create_request(), {})

        kept = result.logs[:-1]
        assert sum(len(line) for line in kept) <= LIMITS.log_bytes + 1
        assert result.logs[-1].endswith("more console line(s) left out")

    async def test_logs_survive_a_failure(self, pool: TransformPool) -> None:
        code = "addHandler('transform', (r) => { console.log('before'); while (true) {} })"

        result = await pool.run("alice", code, create_request(), {})

        assert result.error is not None
        assert result.error.kind == "timeout"
        assert result.logs == ["before"]


class TestCrashes:
    async def test_a_worker_killed_mid_call_is_replaced_and_the_call_retried(
        self, pool: TransformPool
    ) -> None:
        call = asyncio.create_task(
            pool.run("alice", BUSY_FOR_A_WHILE, create_request(), {}, limits=LONG)
        )
        await until(lambda: pool.busy_pids, "the call to start")
        (victim,) = pool.busy_pids
        os.kill(victim, signal.SIGKILL)

        result = await call

        assert result.ok, result.error
        assert victim not in pool.pids
        await until(lambda: len(pool.pids) == pool.size, "the replacement")

    async def test_a_second_death_ends_the_call_as_crashed(self, pool: TransformPool) -> None:
        call = asyncio.create_task(pool.run("alice", SPIN, create_request(), {}, limits=LONG))
        await until(lambda: pool.busy_pids, "the call to start")
        (first,) = pool.busy_pids
        os.kill(first, signal.SIGKILL)
        await until(lambda: pool.busy_pids - {first}, "the retry to start")
        (second,) = pool.busy_pids - {first}
        os.kill(second, signal.SIGKILL)

        result = await call

        assert result.error is not None
        assert result.error.kind == "crashed"
        await until(lambda: len(pool.pids) == pool.size, "the replacements")
        assert (await pool.run("alice", IDENTITY, create_request(), {})).ok

    async def test_a_call_past_the_host_deadline_has_its_worker_killed(
        self, pool: TransformPool
    ) -> None:
        # the engine's CPU limit would end it after 20 s; the host's deadline is 0.5 s later
        # than the call's budget of 0.1 s of CPU: whichever ends it, it is a timeout
        short = Limits(cpu_s=0.1, margin_s=0.5)
        code = (
            "addHandler('transform', (r) => { for(;;){ try { const a = [];"
            " for(;;) a.push(new Array(1e6).fill(1)) } catch (e) {} } })"
        )
        before = pool.pids

        result = await pool.run("mallory", code, create_request(), {}, limits=short)

        assert result.error is not None
        assert result.error.kind == "timeout"
        assert "sandbox was stopped" in result.error.message
        assert pool.pids != before
        await until(lambda: len(pool.pids) == pool.size, "the replacement")


class TestFairness:
    async def test_a_spinning_owner_does_not_starve_another(self) -> None:
        async with TransformPool(size=2, limits=LIMITS) as pool:
            assert pool.per_owner == 1
            finished: list[str] = []

            async def run(owner: str, code: str) -> TransformResult:
                result = await pool.run(owner, code, create_request(), {})
                finished.append(owner)
                return result

            spinning = [asyncio.create_task(run("mallory", SPIN)) for _ in range(4)]
            await until(lambda: pool.busy_pids, "the spinner to start")
            others = [asyncio.create_task(run("alice", IDENTITY)) for _ in range(20)]

            other_results = await asyncio.gather(*others)
            spin_results = await asyncio.gather(*spinning)

        assert all(r.ok for r in other_results)
        assert all(r.error is not None and r.error.kind == "timeout" for r in spin_results)
        # every call of alice's ended before mallory's last spin did
        assert finished[-1] == "mallory"
        assert max(i for i, owner in enumerate(finished) if owner == "alice") < len(finished) - 1
        assert finished.count("mallory") == 4

    def test_the_per_owner_bound_is_half_the_pool(self) -> None:
        assert TransformPool(size=2).per_owner == 1
        assert TransformPool(size=8).per_owner == 4
        assert TransformPool(size=1).per_owner == 1
        assert TransformPool().size >= 2


class TestScheduling:
    async def test_short_calls_run_at_the_hosts_priority_in_the_same_worker(
        self, pool: TransformPool
    ) -> None:
        before = pool.pids
        for _ in range(5):
            assert (await pool.run("alice", IDENTITY, create_request(), {})).ok

        assert pool.pids == before
        assert all(os.sched_getscheduler(pid) == os.sched_getscheduler(0) for pid in before)

    async def test_a_call_waiting_for_a_core_is_not_demoted(self) -> None:
        """A busy machine: the call's worker gets no CPU for many times ``DEMOTE_AFTER_S`` of
        wall time (stopped), then answers in a few milliseconds of CPU; it keeps its priority
        and its process."""
        async with TransformPool(size=1, limits=LIMITS) as pool:
            (worker,) = pool.pids
            os.kill(worker, signal.SIGSTOP)
            try:
                call = asyncio.create_task(pool.run("alice", IDENTITY, create_request(), {}))
                await until(lambda: pool.busy_pids, "the call to start")
                await asyncio.sleep(DEMOTE_AFTER_S * 5)  # wall time passes, no CPU is used
            finally:
                os.kill(worker, signal.SIGCONT)

            assert (await call).ok
            assert os.sched_getscheduler(worker) == os.sched_getscheduler(0)
            assert pool.pids == {worker}

    async def test_a_long_call_moves_to_the_idle_class_and_its_worker_retires(self) -> None:
        async with TransformPool(size=2, limits=LIMITS) as pool:
            call = asyncio.create_task(pool.run("mallory", SPIN, create_request(), {}))
            await until(lambda: pool.busy_pids, "the call to start")
            (spinner,) = pool.busy_pids
            await until(lambda: os.sched_getscheduler(spinner) == os.SCHED_IDLE, "the idle class")

            result = await call

            assert result.error is not None
            assert result.error.kind == "timeout"
            assert spinner not in pool.pids
            await pool.settled()
            assert len(pool.pids) == pool.size
            assert (await pool.run("mallory", IDENTITY, create_request(), {})).ok
            host = os.sched_getscheduler(0)
            assert all(os.sched_getscheduler(pid) == host for pid in pool.pids)

    async def test_without_demotion_a_long_call_keeps_its_priority_and_its_worker(self) -> None:
        async with TransformPool(size=1, limits=LIMITS, demote_after_s=None) as pool:
            (worker,) = pool.pids
            result = await pool.run("mallory", SPIN, create_request(), {})

            assert result.error is not None
            assert "CPU time limit" in result.error.message  # the engine's, not the host's
            assert os.sched_getscheduler(worker) == os.sched_getscheduler(0)
            assert pool.pids == {worker}


class TestConfinement:
    async def test_workers_run_with_small_rlimits_and_few_descriptors(
        self, pool: TransformPool
    ) -> None:
        for pid in pool.pids:
            limits = Path(f"/proc/{pid}/limits").read_text()
            rows = {line[:26].strip(): line[26:].split() for line in limits.splitlines()[1:]}
            assert rows["Max open files"][:2] == ["16", "16"]
            assert rows["Max core file size"][:2] == ["0", "0"]
            assert rows["Max file size"][:2] == ["0", "0"]
            assert rows["Max address space"][0] == str(pool.address_space)
            assert rows["Max cpu time"][0] != "unlimited"
            descriptors = os.listdir(f"/proc/{pid}/fd")
            assert len(descriptors) <= 6  # 0-2 on /dev/null, the two pipes, what reads them

    async def test_workers_inherit_no_settings_or_secrets(self) -> None:
        os.environ["HOOKBAY_CANARY_SECRET"] = "do-not-leak"
        try:
            async with TransformPool(size=1, limits=LIMITS) as pool:
                (pid,) = pool.pids
                environ = Path(f"/proc/{pid}/environ").read_bytes()
        finally:
            del os.environ["HOOKBAY_CANARY_SECRET"]

        assert b"do-not-leak" not in environ
        assert b"HOOKBAY_" not in environ


class TestLifecycle:
    async def test_run_after_close_raises(self) -> None:
        pool = TransformPool(size=1, limits=LIMITS)
        await pool.start()
        pids = pool.pids
        await pool.close()

        with pytest.raises(PoolClosed):
            await pool.run("alice", IDENTITY, create_request(), {})
        for pid in pids:
            assert (
                not Path(f"/proc/{pid}").exists()
                or "zombie" in Path(f"/proc/{pid}/status").read_text()
            )

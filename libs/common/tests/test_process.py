"""``hookbay_common.process``: the probes, and the stop a signal requests."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from hookbay_common.metrics import new_registry
from hookbay_common.process import (
    DrainingServer,
    Probes,
    create_ops_app,
    mount_probes,
    serving,
    stop_on_signals,
)


async def request(app: Any, path: str, method: str = "GET") -> httpx.Response:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://ops"
    ) as client:
        return await client.request(method, path)


def create_probes_app(probes: Probes) -> Starlette:
    app = Starlette()
    mount_probes(app, probes, new_registry())
    return app


def fixed(results: Mapping[str, Any]) -> Any:
    return lambda: results


class TestReadyz:
    async def test_ready_when_every_check_holds(self) -> None:
        app = create_ops_app(fixed({"kafka": True, "mongo": True}), new_registry())
        response = await request(app, "/readyz")
        assert (response.status_code, response.json()) == (
            200, {"ready": True, "kafka": True, "mongo": True},
        )  # fmt: skip

    async def test_one_failing_check_is_a_503_naming_it(self) -> None:
        app = create_ops_app(fixed({"kafka": True, "mongo": False}), new_registry())
        response = await request(app, "/readyz")
        assert (response.status_code, response.json()) == (
            503, {"ready": False, "kafka": True, "mongo": False},
        )  # fmt: skip

    async def test_async_checks(self) -> None:
        async def checks() -> dict[str, bool]:
            await asyncio.sleep(0)
            return {"mongo": False}

        response = await request(create_probes_app(Probes(checks)), "/readyz")
        assert (response.status_code, response.json()) == (503, {"ready": False, "mongo": False})

    async def test_draining_is_unready_whatever_the_checks(self) -> None:
        probes = Probes(fixed({"kafka": True}), draining=lambda: True)
        response = await request(create_probes_app(probes), "/readyz")
        assert (response.status_code, response.json()) == (
            503, {"ready": False, "kafka": True, "draining": True},
        )  # fmt: skip

    async def test_reported_checks_never_gate(self) -> None:
        probes = Probes(fixed({"kafka": True}), reported=fixed({"redis": False}))
        response = await request(create_probes_app(probes), "/readyz")
        assert (response.status_code, response.json()) == (
            200, {"ready": True, "kafka": True, "redis": False},
        )  # fmt: skip


class TestHealthz:
    async def test_ok_while_healthy_even_when_not_ready(self) -> None:
        app = create_ops_app(fixed({"kafka": False}), new_registry(), lambda: True)
        response = await request(app, "/healthz")
        assert (response.status_code, response.json()) == (200, {"status": "ok"})

    async def test_503_when_unhealthy(self) -> None:
        app = create_ops_app(fixed({"kafka": True}), new_registry(), lambda: False)
        response = await request(app, "/healthz")
        assert (response.status_code, response.json()) == (503, {"status": "wedged"})


class TestMetrics:
    async def test_get_scrapes_the_registry(self) -> None:
        response = await request(create_ops_app(fixed({}), new_registry()), "/metrics")
        assert response.status_code == 200
        assert "process_cpu_seconds_total" in response.text

    async def test_other_methods_are_405_with_allow(self) -> None:
        app = create_ops_app(fixed({}), new_registry())
        for method in ("POST", "PUT", "DELETE"):
            response = await request(app, "/metrics", method)
            assert response.status_code == 405
            assert set(response.headers["allow"].split(", ")) == {"GET", "HEAD"}


class TestMountProbes:
    async def test_routes_added_later_answer_the_rest(self) -> None:
        async def catch_all(_: Request) -> PlainTextResponse:
            return PlainTextResponse("spa")

        app = create_probes_app(Probes(fixed({"kafka": True})))
        app.router.routes.append(Route("/{path:path}", catch_all))
        assert (await request(app, "/readyz")).json() == {"ready": True, "kafka": True}
        assert (await request(app, "/elsewhere")).text == "spa"

    async def test_head_answered_by_default(self) -> None:
        app = create_probes_app(Probes(fixed({"kafka": True})))
        assert (await request(app, "/healthz", "HEAD")).status_code == 200

    async def test_in_a_fastapi_app_they_are_its_own_get_routes(self) -> None:
        app = FastAPI()
        mount_probes(app, Probes(fixed({"kafka": True})), new_registry())
        assert (await request(app, "/healthz")).json() == {"status": "ok"}
        assert (await request(app, "/readyz")).json() == {"ready": True, "kafka": True}
        for path in ("/healthz", "/readyz"):
            refused = await request(app, path, "HEAD")
            assert (refused.status_code, refused.headers["allow"]) == (405, "GET")
        assert (await request(app, "/metrics", "HEAD")).status_code == 200
        assert (await request(app, "/openapi.json")).json()["paths"] == {}


class TestStopOnSignals:
    async def test_sigterm_requests_the_stop(self) -> None:
        requested = asyncio.Event()
        with stop_on_signals(requested.set):  # SIGTERM and SIGINT
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(requested.wait(), 5)

    async def test_a_signal_requests_the_stop(self) -> None:
        requested = asyncio.Event()
        with stop_on_signals(requested.set, [signal.SIGUSR1]):
            os.kill(os.getpid(), signal.SIGUSR1)
            await asyncio.wait_for(requested.wait(), 5)

    async def test_each_signal_requests_it_again(self) -> None:
        requests: list[int] = []
        with stop_on_signals(lambda: requests.append(1), [signal.SIGUSR1, signal.SIGUSR2]):
            os.kill(os.getpid(), signal.SIGUSR1)
            os.kill(os.getpid(), signal.SIGUSR2)
            for _ in range(100):
                if len(requests) == 2:
                    break
                await asyncio.sleep(0.01)
        assert requests == [1, 1]

    async def test_the_previous_handling_is_back_after_the_block(self) -> None:
        def previous(signum: int, frame: Any) -> None:
            raise AssertionError("not called in this test")

        saved = signal.signal(signal.SIGUSR1, previous)
        try:
            with stop_on_signals(lambda: None, [signal.SIGUSR1]):
                assert signal.getsignal(signal.SIGUSR1) is not previous
            assert signal.getsignal(signal.SIGUSR1) is previous
        finally:
            signal.signal(signal.SIGUSR1, saved)


class TestServing:
    async def test_serves_the_probes_and_leaves_the_signals_alone(self) -> None:
        before = signal.getsignal(signal.SIGTERM)
        app = create_ops_app(fixed({"kafka": True}), new_registry())
        async with serving(app, "127.0.0.1", 0) as server:
            while not server.started:
                await asyncio.sleep(0.01)
            assert signal.getsignal(signal.SIGTERM) is before
            async with httpx.AsyncClient() as client:
                response = await client.get(f"http://127.0.0.1:{server.port}/readyz")
            assert response.json() == {"ready": True, "kafka": True}
        assert server.should_exit


class TestDrainingServer:
    def create_server(self, delay: float, drained: list[bool]) -> DrainingServer:
        config = uvicorn.Config(Starlette(), log_config=None)
        return DrainingServer(config, delay, lambda: drained.append(True))

    def test_sigterm_drains_before_the_shutdown(self) -> None:
        drained: list[bool] = []
        server = self.create_server(30, drained)
        server.handle_exit(signal.SIGTERM, None)
        assert (drained, server.draining, server.should_exit) == ([True], True, False)
        server.handle_exit(signal.SIGTERM, None)  # a second one: no more waiting
        assert (drained, server.should_exit) == ([True], True)

    def test_sigint_and_no_delay_shut_down_at_once(self) -> None:
        for sig, delay in ((signal.SIGINT, 30.0), (signal.SIGTERM, 0.0)):
            drained: list[bool] = []
            server = self.create_server(delay, drained)
            server.handle_exit(sig, None)
            assert (drained, server.draining, server.should_exit) == ([], False, True)

"""The dashboard's HTTP server (``hookbay_dashboard.server``) as ``python -m hookbay_dashboard``
runs it: what the HTTP parser refuses and what asks for a protocol upgrade is answered in the
JSON error shape, never uvicorn's ``text/plain``; a client that hangs up mid-body is logged at
info, not as a crash with a stack trace (the chaos suite's fuzzing found all three)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from hookbay_common.db import Database, TokenRepository, UserRepository
from hookbay_common.plans import load_plans
from hookbay_dashboard.accounts.service import AccountService
from tests.support.factories import unique_name
from tests.support.ingest import raw_exchange
from tests.support.processes import ServiceProcess, service_process
from tests.support.waiting import until

WEBSOCKET = (
    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
)


@pytest.fixture(scope="module")
async def served(
    env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServiceProcess]:
    log = tmp_path_factory.mktemp("dashboard-server") / "dashboard.log"
    async with service_process("dashboard", {**env, "HOOKBAY_COOKIE_SECURE": "false"}, log) as p:
        yield p


@pytest.fixture(scope="module")
async def token(db: Database) -> str:
    accounts = AccountService(UserRepository(db), TokenRepository(db), load_plans(None))
    _, issued = await accounts.create_user(unique_name("u"))
    return issued.token


def log_lines(process: ServiceProcess) -> list[dict[str, object]]:
    return [json.loads(line) for line in process.log().splitlines() if line.startswith("{")]


class TestMalformedHttp:
    @pytest.mark.parametrize(
        "request_bytes",
        [
            b"POST /api/v1/tokens HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nContent-Length: 3"
            b"\r\n\r\nab",
            b"POST /api/v1/tokens HTTP/1.1\r\nHost: t\r\nContent-Length: 2x\r\n\r\nab",
            b"GET /api/v1/me HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n",
            b"GARBAGE\r\n\r\n",
            b"GET /api/v1/me HTTP/9.9\r\nHost: t\r\n\r\n",
            b"GET /api/v1/me HTTP/1.1\r\nBad Header: x\r\n\r\n",
            b"GET /\xff\xfe HTTP/1.1\r\nHost: t\r\n\r\n",
        ],
        ids=[
            "duplicate-content-length", "malformed-content-length", "bad-chunk-size", "garbage",
            "bad-version", "bad-header-name", "non-ascii-path",
        ],
    )  # fmt: skip
    async def test_400_json(self, served: ServiceProcess, request_bytes: bytes) -> None:
        response = await raw_exchange(served.base, request_bytes)

        assert response.status == 400
        assert response.headers["content-type"] == "application/json"
        assert response.headers["connection"] == "close"
        body = response.json()
        assert body["error"] == "Invalid request"
        assert body["message"].startswith("the request is not valid HTTP/1.1 (")


class TestUpgrade:
    async def test_websocket_request_is_served_as_plain_json(
        self, served: ServiceProcess, token: str
    ) -> None:
        head = f"GET /api/v1/me HTTP/1.1\r\nHost: t\r\n{WEBSOCKET}"

        anonymous = await raw_exchange(served.base, f"{head}\r\n".encode())
        owner = await raw_exchange(
            served.base, f"{head}Authorization: Bearer {token}\r\n\r\n".encode()
        )

        assert anonymous.status == 401
        assert anonymous.json()["error"] == "Not authenticated"
        assert owner.status == 200
        assert owner.headers["content-type"] == "application/json"
        assert owner.headers["connection"] == "close"  # the parser reads no more after it


class TestClientDisconnect:
    async def test_hang_up_mid_body_is_logged_at_info_without_a_trace(
        self, served: ServiceProcess, token: str
    ) -> None:
        """Counted from before the hang-up: the process is the module's, and a malformed body
        of another test can end the same way (a chunk the parser refuses mid-body)."""

        def disconnects() -> list[object]:
            return [e["level"] for e in log_lines(served) if e["event"] == "client_disconnected"]

        before = len(disconnects())
        host, port = served.base.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            f"GET /api/v1/me HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n"
            "Content-Length: 100\r\n\r\nabc".encode()
        )
        await writer.drain()
        writer.close()  # 97 bytes short: the route's first dependency is reading the body
        await reader.read()
        await until(lambda: len(disconnects()) > before, timeout=10)

        assert set(disconnects()) == {"info"}
        assert "request_crashed" not in served.log_events()
        assert "Traceback" not in served.log()

"""Hostile and malformed input to the receiving endpoint: raw bytes over a real
socket to a real ``python -m hookbay_ingest`` (uvicorn + httptools) where the HTTP server is
involved, the in-process app elsewhere; what reaches Kafka is read back."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator

import pytest

from hookbay_common.models import User, Webhook
from hookbay_dev.http import async_client
from tests.support.ingest import Probe, Stack, ingest_process, raw_exchange
from tests.support.waiting import until

LIMIT = 4_500_000
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADER_COUNT = 100


@pytest.fixture(scope="module")
async def remote(env: dict[str, str]) -> AsyncIterator[str]:
    """A real ingest process (its base URL), shared by the module; its stderr is not read."""
    async with ingest_process(env) as (_, base):
        yield base


async def visible_to(base: str, user: User, hook: Webhook) -> None:
    """Wait until the remote process knows the webhook: a declared-oversize POST answers 413
    (after the user and webhook checks) without producing anything."""
    request = (
        f"POST /w/{user.username}/{hook.name} HTTP/1.1\r\nHost: t\r\n"
        f"Content-Length: {LIMIT + 1}\r\nConnection: close\r\n\r\n"
    ).encode()

    async def known() -> bool:
        return (await raw_exchange(base, request)).status == 413

    await until(known, timeout=10, what="the ingest process knows the webhook")


def post_head(user: User, hook: Webhook, *lines: str) -> bytes:
    head = f"POST /w/{user.username}/{hook.name} HTTP/1.1\r\nHost: t\r\n"
    return (head + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


async def only_event_is(probe: Probe, base: str, user: User, hook: Webhook) -> None:
    """Send a plain request and wait for its event: nothing else of ``hook`` reached Kafka
    before it (one owner's events share a partition, so an earlier one would be seen first)."""
    marker = await raw_exchange(base, post_head(user, hook, "Content-Length: 6") + b"marker")
    assert marker.status == 200
    (event,) = await probe.events(marker.json()["requestId"])
    assert event.body == b"marker"
    assert [e.request_id for e in probe.seen.values() if e.webhook_id == hook.id] == [
        event.request_id
    ]


def assert_error_shape(body: object, error: str) -> None:
    assert isinstance(body, dict)
    assert body["error"] == error
    assert isinstance(body["message"], str)
    assert body["message"]


class TestUpgradeWithBody:
    """A body sent with ``Connection: upgrade`` never reaches the app under httptools: it must
    be refused, never answered 200 with an empty body."""

    @pytest.mark.parametrize(
        "upgrade",
        [
            ("Upgrade: websocket", "Connection: Upgrade"),
            ("Upgrade: h2c", "Connection: Upgrade, HTTP2-Settings", "HTTP2-Settings: AAMAAABkAAQ"),
        ],
        ids=["websocket", "h2c"],
    )
    async def test_with_content_length_is_refused_and_nothing_is_queued(
        self, stack: Stack, probe: Probe, remote: str, upgrade: tuple[str, ...]
    ) -> None:
        user, hook = await stack.owner()
        await visible_to(remote, user, hook)
        request = post_head(user, hook, "Content-Length: 12", *upgrade) + b"hello world!"
        response = await raw_exchange(remote, request)
        assert response.status == 400
        assert response.headers["content-type"] == "application/json"
        assert_error_shape(response.json(), "Invalid request")
        assert "upgrade" in response.json()["message"]
        await only_event_is(probe, remote, user, hook)

    async def test_chunked_is_refused(self, stack: Stack, probe: Probe, remote: str) -> None:
        user, hook = await stack.owner()
        await visible_to(remote, user, hook)
        request = post_head(
            user, hook, "Transfer-Encoding: chunked", "Upgrade: h2c", "Connection: upgrade"
        )
        response = await raw_exchange(remote, request + b"c\r\nhello world!\r\n0\r\n\r\n")
        assert response.status == 400
        assert_error_shape(response.json(), "Invalid request")
        await only_event_is(probe, remote, user, hook)

    async def test_without_a_body_is_received(
        self, stack: Stack, probe: Probe, remote: str
    ) -> None:
        """Nothing can be lost: the upgrade is ignored and the empty body is the one sent."""
        user, hook = await stack.owner()
        await visible_to(remote, user, hook)
        request = post_head(user, hook, "Content-Length: 0", "Upgrade: h2c", "Connection: upgrade")
        response = await raw_exchange(remote, request)
        assert response.status == 200
        assert response.headers["connection"] == "close"  # not left hanging on a paused parser
        (event,) = await probe.events(response.json()["requestId"])
        assert event.body == b""


def worst_case_headers(total: int, count: int, fixed: list[tuple[str, bytes]]) -> bytes:
    """``count`` header fields whose names and values add up to exactly ``total`` bytes, made
    of bytes 0x80-0xff (two bytes each in the event's UTF-8), the most in Content-Type (copied
    into the event's ``content_type``)."""
    fields = list(fixed)
    used = sum(len(n) + len(v) for n, v in fields)
    fillers = count - len(fields) - 1
    names = [f"x-fill-{i:03d}" for i in range(fillers)]
    used += sum(len(n) for n in names) + len("content-type")
    each = 64
    fields += [(name, b"\xe9" * each) for name in names]
    fields.append(("content-type", b"\xff" * (total - used - each * fillers)))
    assert sum(len(n) + len(v) for n, v in fields) == total
    assert len(fields) == count
    return b"".join(name.encode() + b": " + value + b"\r\n" for name, value in fields)


class TestHeaderLimits:
    async def test_worst_case_within_the_limits_is_accepted_and_queued(
        self, stack: Stack, probe: Probe, remote: str
    ) -> None:
        """A 4.5 MB body that is not UTF-8 and 100 header fields of exactly 64 KiB of
        non-ASCII bytes: 200, and the event in Kafka byte for byte."""
        user, hook = await stack.owner()
        await visible_to(remote, user, hook)
        body = b"\xff\xfe" * (LIMIT // 2)
        fixed = [("host", b"t"), ("content-length", str(LIMIT).encode())]
        headers = worst_case_headers(MAX_HEADER_BYTES, MAX_HEADER_COUNT, fixed)
        path = f"/w/{user.username}/{hook.name}"
        request = f"POST {path} HTTP/1.1\r\n".encode() + headers + b"\r\n" + body
        response = await raw_exchange(remote, request)
        assert response.status == 200, response.body
        (event,) = await probe.events(response.json()["requestId"], timeout=60)
        assert event.body == body
        assert len(event.request_headers) == MAX_HEADER_COUNT
        assert event.content_type is not None
        assert event.content_type.startswith("\xff")

    async def test_megabytes_of_headers_get_431_not_503(self, stack: Stack, remote: str) -> None:
        """The case of the issue: 1.9 MB of headers and a 4.5 MB body, refused while the head
        arrives (431, JSON) instead of a 503 that no retry can ever turn into a 200."""
        user, hook = await stack.owner()
        await visible_to(remote, user, hook)
        lines = [f"X-Big-{i}: {'v' * 9_000}" for i in range(211)]
        request = post_head(user, hook, f"Content-Length: {LIMIT}", *lines) + b"b" * LIMIT
        response = await raw_exchange(remote, request)
        assert response.status == 431
        assert_error_shape(response.json(), "Request header fields too large")
        assert response.json()["maxHeaderBytes"] == MAX_HEADER_BYTES

    async def test_one_byte_over_is_431(self, stack: Stack) -> None:
        user, hook = await stack.owner()
        url = f"/w/{user.username}/{hook.name}"
        sent = stack.client.build_request("POST", url, content=b"{}", headers={"x-pad": ""})
        room = MAX_HEADER_BYTES - sum(len(n) + len(v) for n, v in sent.headers.raw)
        count = len(sent.headers.raw)
        fits = await stack.client.post(url, content=b"{}", headers={"x-pad": "p" * room})
        assert fits.status_code == 200
        response = await stack.client.post(url, content=b"{}", headers={"x-pad": "p" * (room + 1)})
        assert response.status_code == 431
        assert response.json() == {
            "error": "Request header fields too large",
            "message": f"the request carries {count} header fields of {MAX_HEADER_BYTES + 1} "
            f"bytes; at most {MAX_HEADER_COUNT} fields of {MAX_HEADER_BYTES} bytes in total "
            "(names and values) are accepted",
            "maxHeaderBytes": MAX_HEADER_BYTES,
            "maxHeaderCount": MAX_HEADER_COUNT,
        }

    async def test_one_field_too_many_is_431(self, stack: Stack) -> None:
        user, hook = await stack.owner()
        url = f"/w/{user.username}/{hook.name}"
        added = len(stack.client.build_request("POST", url, content=b"{}").headers.raw)
        fields = [(f"x-{i}", "1") for i in range(MAX_HEADER_COUNT - added)]
        assert (await stack.post(user, hook, headers=fields)).status_code == 200
        fields.append(("x-one-more", "1"))
        response = await stack.post(user, hook, headers=fields)
        assert response.status_code == 431


class TestPipelining:
    async def test_hundreds_of_kilobytes_of_pipelined_requests_are_each_answered(
        self, stack: Stack, remote: str
    ) -> None:
        """Requests written back to back arrive in reads of up to hundreds of kilobytes that end
        inside some request's head: only that head's own bytes count towards the head limit.
        The chaos fuzzing found 54 small pipelined requests (219 KB) answered by one 431 ("0
        header fields of 127973 bytes"), the rest never answered."""
        user, hook = await stack.owner()
        await visible_to(remote, user, hook)
        host, port = remote.removeprefix("http://").split(":")
        pad = "p" * 2000
        one = (
            f"GET /w/{user.username}/{hook.name} HTTP/1.1\r\nHost: t\r\nX-Pad: {pad}\r\n"
            "Content-Length: 1000\r\n\r\n"
        ).encode() + b"b" * 1000
        for _ in range(3):  # each connection's reads fall differently
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(one * 150)  # 450 KB at once
            statuses = []
            async with asyncio.timeout(30):
                for _ in range(150):
                    head = await reader.readuntil(b"\r\n\r\n")
                    statuses.append(int(head.split(b" ")[1]))
                    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                    await reader.readexactly(length)
            writer.close()
            assert statuses == [405] * 150


class TestMalformedHttp:
    """What the HTTP parser refuses is answered in the JSON error shape, never text/plain."""

    @pytest.mark.parametrize(
        "request_bytes",
        [
            b"POST /w/a/b HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab",
            b"POST /w/a/b HTTP/1.1\r\nHost: t\r\nContent-Length: 2x\r\n\r\nab",
            b"POST /w/a/b HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n",
            b"POST /w/a/b HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n",
            b"POST /w/a/b HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 1"
            b"\r\n\r\n1\r\na\r\n0\r\n\r\n",
            b"POST /w/a b HTTP/1.1\r\nHost: t\r\n\r\n",
            b"GARBAGE\r\n\r\n",
            b"POST /w/a/b HTTP/9.9\r\nHost: t\r\n\r\n",
            b"POST /w/a/b HTTP/1.1\r\nBad Header: x\r\n\r\n",
        ],
        ids=[
            "duplicate-content-length", "malformed-content-length", "negative-content-length",
            "bad-chunk-size", "chunked-and-content-length", "bad-request-line", "garbage",
            "bad-version", "bad-header-name",
        ],
    )  # fmt: skip
    async def test_400_json(self, remote: str, request_bytes: bytes) -> None:
        response = await raw_exchange(remote, request_bytes)
        assert response.status == 400
        assert response.headers["content-type"] == "application/json"
        assert response.headers["connection"] == "close"
        assert_error_shape(response.json(), "Invalid request")
        assert response.json()["message"].startswith("the request is not valid HTTP/1.1 (")

    async def test_after_an_answered_request_on_the_same_connection(self, remote: str) -> None:
        """Garbage after an answered request gets its own 400 in JSON."""
        host, port = remote.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        async with asyncio.timeout(10):
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            first = await reader.readuntil(b'{"status":"ok"}')
            writer.write(b"GARBAGE\r\n\r\n")
            second = await reader.read(-1)
        writer.close()
        assert first.startswith(b"HTTP/1.1 200 ")
        assert second.startswith(b"HTTP/1.1 400 Bad Request\r\n")
        assert second.endswith(b'"message": "the request is not valid HTTP/1.1 (Invalid method '
                               b'encountered)"}')  # fmt: skip


class TestOtherPaths:
    @pytest.mark.parametrize("path", ["/w/", "//w/a/b", "/W/a/b", "/w/a/b/extra", "/", "/x"])
    async def test_404_json(self, stack: Stack, path: str) -> None:
        response = await stack.client.post(path, content=b"{}")
        assert response.status_code == 404
        assert_error_shape(response.json(), "Not found")
        assert "detail" not in response.json()

    async def test_405_json_with_allow(self, stack: Stack) -> None:
        response = await stack.client.post("/healthz")
        assert response.status_code == 405
        assert response.headers["allow"] == "GET"
        assert response.json() == {
            "error": "Method not allowed",
            "message": "POST is not allowed on /healthz",
        }

    @pytest.mark.parametrize(
        ("path", "field"), [("/w//open", "username"), ("/w/alice/", "webhookName")]
    )
    async def test_empty_name_is_400(self, stack: Stack, path: str, field: str) -> None:
        response = await stack.client.post(path, content=b"{}")
        assert response.status_code == 400
        assert_error_shape(response.json(), "Invalid request")
        assert response.json()[field] == ""


class TestClientDisconnect:
    async def test_counted_and_logged_at_info_without_traceback(
        self, stack: Stack, env: dict[str, str]
    ) -> None:
        user, hook = await stack.owner()
        async with ingest_process(env, capture_stderr=True) as (proc, base):
            host, port = base.removeprefix("http://").split(":")
            _, writer = await asyncio.open_connection(host, int(port))
            writer.write(post_head(user, hook, "Content-Length: 1000") + b"only part")
            await writer.drain()
            writer.close()  # mid-body
            async with async_client(base_url=base) as client:

                async def counted() -> bool:
                    metrics = (await client.get("/metrics")).text
                    return "hookbay_ingest_client_disconnects_total 1.0" in metrics

                await until(counted, timeout=10, what="the disconnect is counted")
            assert isinstance(proc, subprocess.Popen)  # a piped stderr: exec'd, never forked
            proc.terminate()
            _, stderr = proc.communicate(timeout=30)
        log = stderr.decode()
        (line,) = [line for line in log.splitlines() if "client_disconnected" in line]
        assert '"level": "info"' in line
        assert "request_crashed" not in log
        assert "Traceback" not in log
        assert "ClientDisconnect" not in log

"""Header bytes from the sender to the destination, on the real parser: whatever ingest answers
200 to, the forwarder can send on, through either of its HTTP clients, byte-exact
(docs/owners/receiving.md, "Header bytes").

The destination here is a raw socket server that keeps every header line as the bytes that
arrived: a server library would normalise what this checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from hookbay_common.clock import utcnow
from hookbay_common.db import Database, UserRepository, WebhookRepository
from hookbay_common.headers import forwardable
from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.models import AttemptTrigger, DeliveryTask, Event
from hookbay_common.secrets_box import SecretBox
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.delivery.deliverer import Deliverer, create_clients, create_session
from hookbay_forwarder.settings import ForwarderSettings
from tests.support.factories import TEST_SECRET_KEY, create_user, create_webhook, unique_name
from tests.support.forwarder import running
from tests.support.ingest import Probe, ingest_process, raw_exchange
from tests.support.settings import settings_of
from tests.support.waiting import until

TCHAR = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
FRAMING = frozenset(
    {"content-length", "transfer-encoding", "host", "connection", "expect", "upgrade", "te",
     "trailer", "keep-alive", "proxy-connection", "x-service-signature"}
)  # fmt: skip
"""Names whose value changes how the request is framed, routed or checked: given their own
tests elsewhere, left out of the generated headers here."""
REFUSED = frozenset([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F]) - {0x0A, 0x0D}
"""Control characters (HTAB aside) and DEL: the parser refuses them in a value with 400. CR and
LF end a line: the chaos fuzzer frames those cases."""


@dataclass
class Arrived:
    head: list[tuple[bytes, bytes]]
    body: bytes

    def values(self, name: bytes) -> list[bytes]:
        return [value for n, value in self.head if n.lower() == name]


@dataclass
class RawDestination:
    """Every request that arrived, by path; each is answered 200."""

    port: int = 0
    arrived: dict[str, list[Arrived]] = field(default_factory=dict)

    def url(self) -> str:
        path = f"/{uuid.uuid4().hex}"
        self.arrived[path] = []
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, url: str) -> list[Arrived]:
        return self.arrived[url.split(str(self.port), 1)[1]]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *lines = head[:-4].split(b"\r\n")
                fields = []
                for line in lines:
                    name, _, value = line.partition(b":")
                    fields.append((name, value.lstrip(b" \t")))  # the separator's whitespace
                length = next((int(v) for n, v in fields if n.lower() == b"content-length"), 0)
                body = await reader.readexactly(length)
                path = request_line.split(b" ")[1].decode()
                self.arrived.setdefault(path, []).append(Arrived(fields, body))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        writer.close()


@contextlib.asynccontextmanager
async def raw_destination() -> AsyncIterator[RawDestination]:
    destination = RawDestination()
    server = await asyncio.start_server(destination.serve, "127.0.0.1", 0)
    destination.port = server.sockets[0].getsockname()[1]
    async with server:
        yield destination


def raw_post(path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    lines = [b"POST " + path.encode() + b" HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [name + b": " + value for name, value in headers]
    lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def stored_as(headers: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """What the documented capture rule makes of ``headers`` (written out here, independently of
    ``join_headers``): names lowercased, whitespace around values dropped, repeated names joined
    with ", ", empty lines of a repeated name adding nothing."""
    joined: dict[bytes, bytes] = {}
    for name, value in headers:
        name, value = name.lower(), value.strip(b" \t")
        if name not in joined:
            joined[name] = value
        elif value:
            joined[name] = joined[name] + b", " + value if joined[name] else value
    return joined


def as_bytes(event: Event) -> dict[bytes, bytes]:
    return {k.encode("latin-1"): v.encode("latin-1") for k, v in event.request_headers.items()}


@dataclass
class Intake:
    """A real ``python -m hookbay_ingest`` and a read of its events topic."""

    base: str
    probe: Probe
    db: Database
    penv: dict[str, str]
    _unsigned: str | None = None

    async def unsigned(self) -> str:
        """One webhook without a secret or a destination, made on first use."""
        if self._unsigned is None:
            self._unsigned = await self.webhook()
        return self._unsigned

    async def webhook(self, *, secret: str | None = None, forward_url: str | None = None) -> str:
        user = await UserRepository(self.db).create(create_user(plan="pro"))
        hook = await WebhookRepository(self.db, SecretBox(TEST_SECRET_KEY)).create(
            create_webhook(
                username=user.username,
                secret=SecretStr(secret) if secret else None,
                forward_url=forward_url,
            )
        )
        return f"/w/{user.username}/{hook.name}"

    async def post(self, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> Any:
        return await raw_exchange(self.base, raw_post(path, headers, body))


@pytest.fixture(scope="module")
async def intake(env: dict[str, str], db: Database) -> AsyncIterator[Intake]:
    penv = {
        **env,
        "HOOKBAY_KAFKA_NAMESPACE": f"{env['HOOKBAY_KAFKA_NAMESPACE']}.{unique_name('h')}",
    }
    fs = forwarder_settings(penv)
    await ensure_configured_topics(fs)
    probe = Probe(fs.kafka_bootstrap, fs.topics.events)
    await probe.start()
    try:
        async with ingest_process(penv) as (_, base):
            yield Intake(base, probe, db, penv)
    finally:
        await probe.stop()


def forwarder_settings(penv: dict[str, str]) -> ForwarderSettings:
    return settings_of(penv, ForwarderSettings, forwarder_metrics_port=0, forward_timeout=5.0)


@pytest.fixture(scope="module")
async def destination() -> AsyncIterator[RawDestination]:
    async with raw_destination() as destination:
        yield destination


@pytest.fixture(scope="module")
async def deliverer() -> AsyncIterator[Deliverer]:
    deliverer = Deliverer(
        create_session(allow_private=True, max_connections=10),
        create_clients(2, allow_private=True, max_connections=10),
        timeout=5.0,
        allow_private=True,
    )
    yield deliverer
    await deliverer.aclose()


class TestUndeliverableHeaders:
    async def test_a_signature_with_trailing_spaces_beside_a_non_utf8_header_is_delivered(
        self, intake: Intake, destination: RawDestination
    ) -> None:
        """A signed request whose ``X-Service-Signature`` ends in spaces and whose Content-Type
        holds a byte that is not UTF-8 (so the httpx path delivers it): answered 200, then
        delivered with the signature as captured, without the spaces."""
        secret = "trailing-space-secret"
        url = destination.url()
        path = await intake.webhook(secret=secret, forward_url=url)
        body = b"hello"
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = [
            (b"X-Service-Signature", f"sha256={digest}  ".encode()),
            (b"Content-Type", b"text/plain; charset=\xff"),
        ]
        async with running(Forwarder(forwarder_settings(intake.penv))):
            answer = await intake.post(path, headers, body)
            assert answer.status == 200, answer.body
            await until(lambda: bool(destination.at(url)), 30, what="the delivery")
        [event] = await intake.probe.events(answer.json()["requestId"])
        [arrived] = destination.at(url)
        assert arrived.body == body
        assert arrived.values(b"x-service-signature") == [f"sha256={digest}".encode()]
        assert arrived.values(b"content-type") == [b"text/plain; charset=\xff"]
        assert event.request_headers["x-service-signature"] == f"sha256={digest}"
        assert event.signature_valid is True


_names = st.text(TCHAR, min_size=1, max_size=12).filter(
    lambda n: n.lower() not in FRAMING and not n.lower().startswith("x-hookbay-")
)
_fine_bytes = [0x09, *range(0x20, 0x7F), *range(0x80, 0x100)]
_values = st.binary(max_size=24).map(lambda b: bytes(_fine_bytes[x % len(_fine_bytes)] for x in b))
_values_or_refused = st.one_of(
    _values,
    st.tuples(_values, st.sampled_from(sorted(REFUSED)), _values).map(
        lambda t: t[0] + bytes([t[1]]) + t[2]
    ),
)
_utf8_values = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\r\n"), max_size=12
).map(lambda t: f" {t}\t ".encode())
_fields = st.lists(st.tuples(_names.map(str.encode), _values_or_refused), min_size=1, max_size=6)
_utf8_fields = st.lists(st.tuples(_names.map(str.encode), _utf8_values), min_size=1, max_size=6)
_repeated = st.lists(_values, min_size=2, max_size=4).map(lambda vs: [(b"X-Rep", v) for v in vs])
PROPERTY = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class TestAcceptedHeadersAreDeliverable:
    """Header lines at the byte level through the real ingest process: a value with a control
    character gets 400 and nothing is stored; anything else gets 200, is stored by the capture
    rule, and both delivery paths send exactly the stored values."""

    async def check(
        self,
        intake: Intake,
        destination: RawDestination,
        deliverer: Deliverer,
        headers: list[tuple[bytes, bytes]],
    ) -> None:
        answer = await intake.post(await intake.unsigned(), headers, b"{}")
        if any(REFUSED & set(value) for _, value in headers):
            assert answer.status == 400, (headers, answer.body)
            assert "not valid HTTP/1.1" in answer.json()["message"]
            return
        assert answer.status == 200, (headers, answer.body)
        [event] = await intake.probe.events(answer.json()["requestId"])
        stored = as_bytes(event)
        assert {n: v for n, v in stored.items() if n in stored_as(headers)} == stored_as(headers)
        url = destination.url()
        task = DeliveryTask(
            event=event, chain_id=new_id(IdPrefix.ATTEMPT), trigger=AttemptTrigger.INITIAL,
            number=1, url=url, not_before=utcnow() - timedelta(seconds=1),
        )  # fmt: skip
        outcome = await deliverer.attempt(task)
        assert outcome.status_code == 200, (headers, outcome.error)
        [arrived] = destination.at(url)
        for name, value in forwardable(event.request_headers):
            assert arrived.values(name) == [value], (name, headers)

    @PROPERTY
    @given(fields=_fields, repeated=_repeated)
    async def test_any_value_bytes_via_httpx(
        self,
        intake: Intake,
        destination: RawDestination,
        deliverer: Deliverer,
        fields: list[tuple[bytes, bytes]],
        repeated: list[tuple[bytes, bytes]],
    ) -> None:
        # a value that is not UTF-8 sends the whole request through httpx
        headers = [*fields, *repeated, (b"X-Latin", b" caf\xe9 ")]
        await self.check(intake, destination, deliverer, headers)

    @PROPERTY
    @given(fields=_utf8_fields)
    async def test_utf8_values_via_aiohttp(
        self,
        intake: Intake,
        destination: RawDestination,
        deliverer: Deliverer,
        fields: list[tuple[bytes, bytes]],
    ) -> None:
        await self.check(intake, destination, deliverer, fields)

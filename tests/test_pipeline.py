"""The whole path on real services: ingest → Kafka → forwarder → destination, and the recorder
writing the event and its attempts into MongoDB."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from hookbay_common.db import (
    AttemptRepository,
    Database,
    EventRepository,
    UserRepository,
    WebhookRepository,
)
from hookbay_common.models import Event, EventStatus, RejectedReason
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.recorder import Recorder
from hookbay_forwarder.settings import ForwarderSettings
from hookbay_ingest.app import Ingest, create_app
from tests.support.factories import TEST_SECRET_KEY, create_user, create_webhook
from tests.support.forwarder import forwarder_namespace, running
from tests.support.ingest import ingest_settings
from tests.support.receiver import Receiver, Reply, serve_receiver
from tests.support.waiting import until


@dataclass
class Pipeline:
    client: httpx.AsyncClient
    ingest: Ingest
    db: Database
    receiver: Receiver

    async def webhook(self, forward_url: str | None, secret: str | None = None) -> str:
        user = await UserRepository(self.db).create(create_user(plan="pro"))
        hook = await WebhookRepository(self.db, SecretBox(TEST_SECRET_KEY)).create(
            create_webhook(
                username=user.username,
                forward_url=forward_url,
                secret=SecretStr(secret) if secret else None,
            )
        )
        await self.ingest.view.reconcile()
        return f"/w/{user.username}/{hook.name}"

    async def send(self, path: str, **kw: Any) -> httpx.Response:
        """POST as a sender does: a 503 (Kafka not acknowledging in time, documented, with
        Retry-After) is sent again, so a loaded machine's slow first produce to a new topic
        does not fail a test about something else."""
        answers: list[httpx.Response] = []

        async def answered() -> bool:
            answers.append(await self.client.post(path, **kw))
            return answers[-1].status_code != 503 or not answers[-1].headers["retry-after"]

        await until(answered, 60, interval=0.2, what=f"an answer other than 503 to {path}")
        return answers[-1]

    async def event(self, request_id: str, status: EventStatus) -> Event:
        """The event once MongoDB holds it with ``status``."""
        events = EventRepository(self.db)

        async def recorded() -> bool:
            found = await events.get_by_request_id(request_id)
            return found is not None and found.status is status

        await until(recorded, 60, what=f"event {request_id} {status}")
        found = await events.get_by_request_id(request_id)
        assert found is not None
        return found


@pytest.fixture(scope="module")
async def pipeline(settings: Settings, db: Database) -> AsyncIterator[Pipeline]:
    # a destination that hangs is held open by the test, never timed out by the forwarder: under
    # load the pending read can take seconds, and a timeout would add a second attempt
    fs: ForwarderSettings = await forwarder_namespace(settings, forward_timeout=120.0)
    app = create_app(ingest_settings(settings, kafka_namespace=fs.kafka_namespace))
    async with (
        serve_receiver() as receiver,
        running(Forwarder(fs)),
        running(Recorder(fs)),
        app.router.lifespan_context(app),
    ):
        ingest: Ingest = app.state.ingest
        async with asyncio.timeout(30):
            await ingest.kafka_connected.wait()
            await ingest.view.following.wait()
        transport = httpx.ASGITransport(app=app, client=("198.51.100.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:
            yield Pipeline(client, ingest, db, receiver)


class TestPipeline:
    async def test_event_is_listed_while_its_destination_hangs_then_succeeds(
        self, pipeline: Pipeline
    ) -> None:
        gate = asyncio.Event()
        url = pipeline.receiver.url(Reply(200, b"done", gate=gate))
        path = await pipeline.webhook(url)
        response = await pipeline.send(
            path, content=b'{"order": 1}', headers={"content-type": "application/json"}
        )
        assert response.status_code == 200
        request_id = response.json()["requestId"]
        await pipeline.receiver.wait_for(url, 1)  # the destination holds the request open
        pending = await pipeline.event(request_id, EventStatus.PENDING)
        assert pending.body == b'{"order": 1}'
        assert pending.forward_url == url
        gate.set()
        done = await pipeline.event(request_id, EventStatus.SUCCESS)
        (attempt,) = await AttemptRepository(pipeline.db).list_for_event(done.id)
        assert (attempt.status_code, attempt.response_body) == (200, b"done")

    async def test_no_destination_is_success_with_zero_attempts(self, pipeline: Pipeline) -> None:
        path = await pipeline.webhook(None)
        response = await pipeline.send(path, content=b"hello")
        event = await pipeline.event(response.json()["requestId"], EventStatus.SUCCESS)
        assert await AttemptRepository(pipeline.db).list_for_event(event.id) == []

    async def test_signature_rejected_event_is_failed_and_never_delivered(
        self, pipeline: Pipeline
    ) -> None:
        url = pipeline.receiver.url()
        path = await pipeline.webhook(url, secret="s3cret")
        rejected = await pipeline.send(
            path, content=b"forged", headers={"x-service-signature": "00"}
        )
        assert rejected.status_code == 401
        body = b"genuine"
        signature = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        accepted = await pipeline.send(
            path, content=body, headers={"x-service-signature": signature}
        )
        assert accepted.status_code == 200
        (delivered,) = await pipeline.receiver.wait_for(url, 1)  # same owner: in order, so the
        assert delivered.body == b"genuine"  # rejected one was handled (and skipped) first
        failed = await pipeline.event(rejected.json()["requestId"], EventStatus.FAILED)
        assert failed.rejected_reason is RejectedReason.INVALID_SIGNATURE
        assert await AttemptRepository(pipeline.db).list_for_event(failed.id) == []
        assert len(pipeline.receiver.received(url)) == 1

    async def test_retry_then_success_is_recorded(self, pipeline: Pipeline) -> None:
        url = pipeline.receiver.url(Reply(502, b"bad gateway"))
        path = await pipeline.webhook(url)
        response = await pipeline.send(path, content=b"x")
        event = await pipeline.event(response.json()["requestId"], EventStatus.SUCCESS)
        attempts = await AttemptRepository(pipeline.db).list_for_event(event.id)
        assert [(a.number, a.status_code, a.will_retry) for a in attempts] == [
            (1, 502, True),
            (2, 200, False),
        ]

"""Ingest fixtures: the real app (lifespan and all) on real Kafka, FerretDB and Redis, driven
in process through httpx's ASGI transport, and a probe that reads what reached the topic."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from hookbay_common.db import Database, UserRepository, WebhookRepository
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_ingest.app import Ingest, create_app
from tests.support.factories import TEST_SECRET_KEY
from tests.support.ingest import Probe, Stack, ingest_settings


@pytest.fixture(scope="session")
async def stack(settings: Settings, db: Database) -> AsyncIterator[Stack]:
    await ensure_configured_topics(settings)
    app = create_app(ingest_settings(settings))
    ingest: Ingest = app.state.ingest
    async with app.router.lifespan_context(app):
        async with asyncio.timeout(30):
            await ingest.kafka_connected.wait()
            await ingest.view.following.wait()
        transport = httpx.ASGITransport(app=app, client=("198.51.100.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:
            box = SecretBox(TEST_SECRET_KEY)
            yield Stack(client, ingest, UserRepository(db), WebhookRepository(db, box))


@pytest.fixture
async def probe(settings: Settings) -> AsyncIterator[Probe]:
    probe = Probe(settings.kafka_bootstrap, settings.topics.events)
    await probe.start()
    yield probe
    await probe.stop()

"""An event's ``client_ip`` on the real server (``python -m hookbay_ingest``), where a request
arrives from a loopback peer, as behind a sidecar proxy: ``X-Forwarded-For`` is believed only from
``HOOKBAY_TRUSTED_PROXIES`` (docs/owners/receiving.md), never because the server in front of the
app trusts loopback peers by default."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from hookbay_common.db import Database, UserRepository, WebhookRepository
from hookbay_common.kafka import ensure_configured_topics
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from tests.support.factories import TEST_SECRET_KEY, create_user, create_webhook, unique_name
from tests.support.ingest import Probe, ingest_process
from tests.support.settings import settings_of

FORGED = "203.0.113.9"


@pytest.fixture
async def namespace(env: dict[str, str]) -> AsyncIterator[tuple[dict[str, str], Probe]]:
    penv = {
        **env,
        "HOOKBAY_KAFKA_NAMESPACE": f"{env['HOOKBAY_KAFKA_NAMESPACE']}.{unique_name('ip')}",
    }
    settings = settings_of(penv, Settings)
    await ensure_configured_topics(settings)
    probe = Probe(settings.kafka_bootstrap, settings.topics.events)
    await probe.start()
    try:
        yield penv, probe
    finally:
        await probe.stop()


async def webhook_path(db: Database) -> str:
    user = await UserRepository(db).create(create_user(plan="pro"))
    hook = await WebhookRepository(db, SecretBox(TEST_SECRET_KEY)).create(
        create_webhook(username=user.username)
    )
    return f"/w/{user.username}/{hook.name}"


@pytest.mark.parametrize(
    ("trusted", "client_ip"),
    [("", "127.0.0.1"), ("127.0.0.1/32", FORGED)],
    ids=["none", "loopback"],
)
async def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(
    namespace: tuple[dict[str, str], Probe], db: Database, trusted: str, client_ip: str
) -> None:
    penv, probe = namespace
    path = await webhook_path(db)
    async with (
        ingest_process({**penv, "HOOKBAY_TRUSTED_PROXIES": trusted}) as (_, base),
        httpx.AsyncClient(base_url=base) as client,
    ):
        answer = await client.post(path, content=b"{}", headers={"X-Forwarded-For": FORGED})
        assert answer.status_code == 200
        (event,) = await probe.events(answer.json()["requestId"])
    assert event.client_ip == client_ip

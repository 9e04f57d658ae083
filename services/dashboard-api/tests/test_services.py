"""``hookbay_dashboard.services``: the ``hookbay-admin`` commands get the services the API builds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookbay_common.cli import CliProducer, Runtime
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db.client import Database
from hookbay_common.plans import load_plans
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_dashboard.commands import services_for
from hookbay_dashboard.events.service import EventService
from hookbay_dashboard.services import Services
from tests.support.dashboard import Dashboard
from tests.support.factories import create_event, create_webhook


@pytest.fixture
async def cli_runtime(settings: Settings, db: Database) -> AsyncIterator[Runtime]:
    """What ``CliState.run`` hands a command, over the database the dashboard serves."""
    box = SecretBox(settings.secret_key.get_secret_value())
    producer = CliProducer(settings)
    config = ConfigPublisher(producer.send, settings.topics.config, box)
    yield Runtime(settings, db, load_plans(settings.plans_file), box, producer, config)
    await producer.close()


def wiring(service: object) -> dict[str, type]:
    """What a service was built with: each attribute's type (``NoneType`` for one left out)."""
    return {name: type(value) for name, value in vars(service).items()}


class TestServicesForCommands:
    def test_each_service_is_built_as_the_api_builds_it(
        self, dashboard: Dashboard, cli_runtime: Runtime
    ) -> None:
        cli, api = services_for(cli_runtime), dashboard.runtime.services
        assert isinstance(api, Services)
        assert wiring(cli.events()) == wiring(api.events())
        assert wiring(cli.accounts()) == wiring(api.accounts())
        assert wiring(cli.webhooks()) == wiring(api.webhooks())
        assert wiring(cli.stats()) == wiring(api.stats())

    async def test_the_commands_event_service_answers_the_overview_as_the_api(
        self, dashboard: Dashboard, cli_runtime: Runtime
    ) -> None:
        """The overview needs the stats: a command's event service has them too."""
        owner = await dashboard.owner()
        webhook = await dashboard.runtime.webhooks.create(
            create_webhook(username=owner.username, name="orders")
        )
        event = create_event(
            webhook_id=webhook.id, username=owner.username, webhook_name=webhook.name
        )
        await dashboard.runtime.events.upsert_many([event])
        events: EventService = services_for(cli_runtime).events()

        from_cli: dict[str, Any] = (await events.overview(owner.username)).model_dump(mode="json")
        from_api = (await owner.client.get("/api/v1/overview")).json()

        assert [row["name"] for row in from_cli["webhooks"]] == ["orders"]
        assert [e["id"] for e in from_cli["recent_events"]] == [event.id]
        assert from_cli == from_api

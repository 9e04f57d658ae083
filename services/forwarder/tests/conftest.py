"""Forwarder fixtures: a real local destination, and a forwarder and recorder running in this
process on real Kafka and FerretDB, each with a topic namespace of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookbay_common.settings import Settings
from hookbay_forwarder.delivery import Forwarder
from hookbay_forwarder.recorder import Recorder
from hookbay_forwarder.settings import ForwarderSettings
from tests.support.forwarder import forwarder_namespace, running
from tests.support.receiver import Receiver


@pytest.fixture(scope="session")
async def fwd_settings(settings: Settings) -> ForwarderSettings:
    return await forwarder_namespace(settings)


@pytest.fixture(scope="session")
async def forwarder(
    fwd_settings: ForwarderSettings, receiver: Receiver
) -> AsyncIterator[Forwarder]:
    process = Forwarder(fwd_settings)
    async with running(process):
        yield process


@pytest.fixture(scope="session")
async def rec_settings(settings: Settings) -> ForwarderSettings:
    """A namespace of the recorder's own: no forwarder adds attempts to what its tests produce."""
    return await forwarder_namespace(settings)


@pytest.fixture(scope="session")
async def recorder(rec_settings: ForwarderSettings, db: Any) -> AsyncIterator[Recorder]:
    process = Recorder(rec_settings)
    async with running(process):
        yield process

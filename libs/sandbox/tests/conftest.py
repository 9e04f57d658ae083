"""Sandbox pools with real worker subprocesses, shared by the module that asks for them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hookbay_sandbox import TransformPool
from tests.support.transform import LIMITS


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[TransformPool]:
    async with TransformPool(size=2, limits=LIMITS) as running:
        yield running


@pytest.fixture(scope="module")
async def single() -> AsyncIterator[TransformPool]:
    """One worker: consecutive calls run in the same process."""
    async with TransformPool(size=1, limits=LIMITS) as running:
        yield running

"""Sandbox pools with real worker subprocesses, shared by the module that asks for them.

Their workers are never demoted (``demote_after_s=None``): a call reaches the engine's own limits
and answers however busy the machine is (on a saturated machine a demoted call of more than
20 ms of CPU can meet the host's deadline first). Demotion has its own pools and tests
(``test_pool.py``: ``TestScheduling``, ``TestFairness``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hookbay_sandbox import TransformPool
from tests.support.transform import LIMITS


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[TransformPool]:
    async with TransformPool(size=2, limits=LIMITS, demote_after_s=None) as running:
        yield running


@pytest.fixture(scope="module")
async def single() -> AsyncIterator[TransformPool]:
    """One worker: consecutive calls run in the same process."""
    async with TransformPool(size=1, limits=LIMITS, demote_after_s=None) as running:
        yield running

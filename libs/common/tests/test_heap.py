"""``heap.settle``: what start-up made is left out of the collector's walks; what comes later
is still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from hookbay_common.process import heap


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored")
def test_start_up_objects_are_frozen_later_cycles_still_collected() -> None:
    started = [object()]  # a tracked object alive at start-up
    heap.settle()
    assert gc.get_freeze_count() > 0
    assert not any(o is started for o in gc.get_objects())  # no collection walks it
    assert gc.get_threshold()[0] == heap.YOUNG_THRESHOLD

    later = Node()
    later.self = later  # a cycle made after start-up: only the collector frees it
    gone = weakref.ref(later)
    del later
    gc.collect()
    assert gone() is None


class Node:
    self: Node | None = None

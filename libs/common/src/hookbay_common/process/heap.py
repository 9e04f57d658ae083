"""The heap a process starts with, kept out of the cyclic garbage collector's work.

A service's modules, settings, clients and caches are made at start-up and live until it stops,
and most of its objects are theirs (about 100,000 tracked objects in ingest). CPython's cyclic
collector walks every tracked object of the oldest generation on each full collection: a
saturated ingest spent about 56 ms per full pass, several times a minute
(docs/decisions.md, "Operations"). Once started, a process calls ``settle`` to move what exists
into the permanent generation (``gc.freeze``): a full collection then walks only what was made
since. Reference counting frees almost everything a request or a batch makes the moment it is
done, so the young generation is collected after ``YOUNG_THRESHOLD`` allocations instead of
700: each collection still walks only the few objects then alive, and runs less often.
"""

from __future__ import annotations

import gc
from typing import Final

YOUNG_THRESHOLD: Final = 10_000
"""Allocations (net of deallocations) of tracked objects between young-generation collections
(CPython's default: 700). The older generations keep their default ratios."""


def settle() -> None:
    """Collect what start-up left as garbage, freeze the rest, raise the young threshold.
    Call once, after start-up; objects made later are collected as usual."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)

"""What an event repository remembers between calls, and how much of it."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final

LOCATE_CACHE: Final = 50_000
"""Event ids whose (webhook, page) the repository remembers from its own writes, so the
attempts that follow an event need no lookup (~250 bytes each, ~12 MiB full). A first attempt
follows its event within seconds: 50,000 covers more than 2 minutes at 400 events/s; a retry
found outside it costs one read. Full within a soak's warm-up (8 minutes at 100 events/s), so
the soak judges the recorder's steady state."""
HEAD_CACHE: Final = 20_000
"""Events whose head (deliveries, status, webhook, page, creation time) the repository
remembers from its own writes, so a delivery record that follows its event is one conditional
write, not a read and a write (~400 bytes each, ~8 MiB full). A router's records and their
attempts follow the event within seconds: 20,000 covers 50 s at 400 events/s; a record found
outside it costs the read."""
BOOK_START_CACHE: Final = 50_000
"""Settled books (``_settled``) whose start the repository remembers for date ranges: 8 bytes
and a key each, so a date range reads the one book it lands in instead of binary-searching."""
RECENT_CACHE: Final = 100_000
"""Webhooks whose counter's newest ids (``recent``) the repository remembers from its own
writes, so keeping them up to date is one write, not a read and a write."""
SUMMARY_CACHE: Final = 10_000
"""Webhooks whose newest page summary the repository remembers as it wrote it last (about
2 KiB each, ~20 MiB full), so adding a batch's tally to it is one conditional write, not a read
and a write: new events land on a webhook's top page, so one summary a webhook is what the
recorder adds to every interval; an older page's (a retry's status change) costs the read."""
BLOCK_CACHE: Final = 100_000
"""Webhooks whose reserved block of positions (``seq``) the repository remembers."""


def _keep(cache: OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """Put ``key`` in a least-recently-written cache of at most ``limit`` entries."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)

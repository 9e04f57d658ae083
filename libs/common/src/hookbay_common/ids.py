"""Identifiers: a type prefix plus a time-sortable, URL-safe ULID suffix (lower case)."""

from __future__ import annotations

import os
import threading
import time
from enum import StrEnum
from typing import Final

_CROCKFORD: Final = "0123456789abcdefghjkmnpqrstvwxyz"
_PAIRS: Final = tuple(a + b for a in _CROCKFORD for b in _CROCKFORD)
"""Two base-32 digits for each 10-bit number: a ULID's 128 bits (with two leading zero bits)
are 13 of them."""


class IdPrefix(StrEnum):
    EVENT = "evt"
    REQUEST = "req"
    WEBHOOK = "wh"
    ATTEMPT = "att"
    TOKEN = "tok"  # noqa: S105 - an id prefix
    CHAIN = "chn"
    REPLAY_JOB = "rpj"
    DELIVERY = "dlv"
    DESTINATION = "dst"
    ROUTE = "rte"
    TRANSFORMATION = "trf"
    ISSUE = "iss"
    ALERT_CHANNEL = "ach"
    NOTIFICATION = "msg"


def new_id(prefix: IdPrefix) -> str:
    """A new id such as ``evt_01jd3k...``; ids made in later milliseconds sort after earlier ones."""
    return f"{prefix}_{_ulid()}"


def _ulid() -> str:
    """A ULID (48 bits of Unix milliseconds, 80 bits of randomness from the OS) in lower-case
    Crockford base 32, as python-ulid's ``ULID()`` makes it: within one millisecond, the last
    id's randomness plus one, so a process's ids sort in the order it made them. Written ten
    bits at a time, the time's ten digits once a millisecond: a fraction of the CPU of
    ``str(ULID()).lower()`` (two ids a received request; docs/decisions.md)."""
    global _last
    ms = time.time_ns() // 1_000_000
    with _lock:
        known, digits, rand = _last
        if ms == known and rand < _RANDOM_MAX:
            rand += 1
        else:
            if ms != known:
                digits = "".join([_PAIRS[(ms >> shift) & 1023] for shift in _TIME_SHIFTS])
            rand = int.from_bytes(os.urandom(10))
        _last = (ms, digits, rand)
    return digits + "".join([_PAIRS[(rand >> shift) & 1023] for shift in _RANDOM_SHIFTS])


_TIME_SHIFTS: Final = (40, 30, 20, 10, 0)
"""The time's 48 bits as 50 (two leading zeros): five pairs of digits."""
_RANDOM_SHIFTS: Final = (70, 60, 50, 40, 30, 20, 10, 0)
_RANDOM_MAX: Final = (1 << 80) - 1
_lock = threading.Lock()
_last: tuple[int, str, int] = (-1, "", 0)
"""The millisecond of the last id, its ten time digits and its randomness."""


def has_prefix(value: str, prefix: IdPrefix) -> bool:
    head, sep, tail = value.partition("_")
    return sep == "_" and head == prefix.value and len(tail) == 26 and tail.isalnum()


def derived_id(prefix: IdPrefix, source: str) -> str:
    """An id of another kind sharing ``source``'s suffix: the same source gives the same id
    (an event's first delivery chain is ``derived_id(CHAIN, event.id)``, however often it runs)."""
    return f"{prefix}_{source.partition('_')[2]}"

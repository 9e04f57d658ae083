"""Identifiers: a type prefix plus a time-sortable, URL-safe ULID suffix (lower case)."""

from __future__ import annotations

import os
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
    """A ULID (48 bits of Unix milliseconds, 80 random bits from the OS) in lower-case Crockford
    base 32, as python-ulid writes it, ten bits at a time, the time's ten digits written once a
    millisecond: a fraction of the CPU of ``str(ULID()).lower()`` (two ids a received request;
    docs/decisions.md)."""
    global _time_digits
    ms = time.time_ns() // 1_000_000
    known, digits = _time_digits  # one reference: consistent across threads
    if ms != known:  # 50 bits (two leading zeros): five pairs
        digits = "".join([_PAIRS[(ms >> shift) & 1023] for shift in (40, 30, 20, 10, 0)])
        _time_digits = (ms, digits)
    rand = int.from_bytes(os.urandom(10))
    return digits + "".join([_PAIRS[(rand >> shift) & 1023] for shift in _RANDOM_SHIFTS])


_RANDOM_SHIFTS: Final = (70, 60, 50, 40, 30, 20, 10, 0)
_time_digits: tuple[int, str] = (-1, "")
"""The last millisecond an id was made in, and its ten digits."""


def has_prefix(value: str, prefix: IdPrefix) -> bool:
    head, sep, tail = value.partition("_")
    return sep == "_" and head == prefix.value and len(tail) == 26 and tail.isalnum()


def derived_id(prefix: IdPrefix, source: str) -> str:
    """An id of another kind sharing ``source``'s suffix: the same source gives the same id
    (an event's first delivery chain is ``derived_id(CHAIN, event.id)``, however often it runs)."""
    return f"{prefix}_{source.partition('_')[2]}"

"""Identifiers: a type prefix plus a time-sortable, URL-safe ULID suffix (lower case)."""

from __future__ import annotations

from enum import StrEnum

from ulid import ULID


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
    return f"{prefix}_{str(ULID()).lower()}"


def has_prefix(value: str, prefix: IdPrefix) -> bool:
    head, sep, tail = value.partition("_")
    return sep == "_" and head == prefix.value and len(tail) == 26 and tail.isalnum()


def derived_id(prefix: IdPrefix, source: str) -> str:
    """An id of another kind sharing ``source``'s suffix: the same source gives the same id
    (an event's first delivery chain is ``derived_id(CHAIN, event.id)``, however often it runs)."""
    return f"{prefix}_{source.partition('_')[2]}"

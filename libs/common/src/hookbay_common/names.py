"""The name grammar of users, webhooks and plans (docs/owners/receiving.md, "Names")."""

from __future__ import annotations

import re

from hookbay_common.errors import InvalidRequest

USERNAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,37}[a-z0-9])?$")
WEBHOOK_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
WEBHOOK_NAME_MAX = 64
PLAN_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


def is_valid_username(value: str) -> bool:
    return USERNAME.fullmatch(value) is not None


def is_valid_webhook_name(value: str) -> bool:
    return len(value) <= WEBHOOK_NAME_MAX and WEBHOOK_NAME.fullmatch(value) is not None


def check_username(value: str) -> str:
    if not is_valid_username(value):
        raise InvalidRequest(
            f"invalid username {value!r}: 1-39 characters of a-z, 0-9 and '-', "
            "starting and ending with a letter or digit",
            username=value,
        )
    return value


def check_webhook_name(value: str) -> str:
    if not is_valid_webhook_name(value):
        raise InvalidRequest(
            f"invalid webhook name {value!r}: up to {WEBHOOK_NAME_MAX} characters of a-z and 0-9 "
            "in words joined by single '-'",
            webhookName=value,
        )
    return value


def unstorable_character(value: str) -> str | None:
    """Why ``value`` cannot be stored or used as a key, or ``None`` when it can: a NUL (the
    PostgreSQL behind FerretDB refuses it in any string, BSON keys and C strings end at it) or
    an unpaired surrogate (not Unicode text: it has no UTF-8 encoding, so neither BSON, Redis
    nor a password hash can take it). Astral characters are fine."""
    if "\x00" in value:
        return "a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "an unpaired surrogate"
    return None


def check_storable(value: str, where: str) -> str:
    """``value`` unchanged, or ``InvalidRequest`` naming ``where`` it came from."""
    problem = unstorable_character(value)
    if problem is not None:
        raise InvalidRequest(
            f"{where} holds {problem}, which hookbay does not accept in any text",
            parameter=where,
        )
    return value

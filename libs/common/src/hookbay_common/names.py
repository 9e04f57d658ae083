"""The name grammar of users, webhooks and plans (DESIGN.md §3)."""

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

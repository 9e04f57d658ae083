"""A process's settings as it reads them from its ``HOOKBAY_*`` environment."""

from __future__ import annotations

from typing import Any, TypeVar

from hookbay_common.settings import Settings

S = TypeVar("S", bound=Settings)


def settings_of(env: dict[str, str], kind: type[S], **overrides: Any) -> S:
    """``kind`` read from ``env`` (``HOOKBAY_NAME`` → ``name``), then ``overrides``."""
    fields: dict[str, Any] = {key.removeprefix("HOOKBAY_").lower(): v for key, v in env.items()}
    return kind(**{**fields, **overrides})

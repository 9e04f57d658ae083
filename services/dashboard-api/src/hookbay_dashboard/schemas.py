"""Response types shared by the dashboard API's domains."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import PlainSerializer, WithJsonSchema

from hookbay_common.clock import isoformat

Timestamp = Annotated[
    datetime,
    PlainSerializer(isoformat, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A moment, written in JSON as ``2026-11-21T10:04:05.123Z`` (ISO 8601, UTC, milliseconds,
``Z``) whatever the offset it was made with; Python dumps keep the ``datetime``."""

"""The request a transformation sees for an event as hookbay received it: the same for a
delivery in the forwarder and a test run in the dashboard."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Protocol

from hookbay_sandbox.model import TransformRequest


class ReceivedEvent(Protocol):
    """What the request is made of (an event of ``hookbay_common.models``)."""

    @property
    def request_headers(self) -> Mapping[str, str]: ...
    @property
    def body(self) -> bytes: ...
    @property
    def content_type(self) -> str | None: ...
    @property
    def query(self) -> str | None: ...
    @property
    def username(self) -> str: ...
    @property
    def webhook_name(self) -> str: ...


def request_of_event(event: ReceivedEvent) -> TransformRequest:
    """The request a transformation sees for ``event``: its headers (names lower case), its
    body as JSON when its content type is JSON and it parses as JSON the engine reads alike (no
    ``NaN``, no number out of range such as ``1e400``, no nesting deeper than Python parses),
    handed over as its text and never parsed again here; else its text (bytes that are not
    UTF-8 as U+FFFD); its query string, and the path it was posted to
    (``/w/{username}/{webhook}``)."""
    headers = {name.lower(): value for name, value in event.request_headers.items()}
    text = event.body.decode("utf-8", errors="replace")
    path = f"/w/{event.username}/{event.webhook_name}"
    query = event.query or ""
    if _is_json(event.content_type) and _parses(text):
        return TransformRequest(headers, query=query, path=path, body_json=text)
    return TransformRequest(headers, body=text, query=query, path=path)


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _parses(text: str) -> bool:
    try:
        json.loads(text, parse_constant=_refuse, parse_float=_finite)
    except (ValueError, RecursionError):
        return False
    return True


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value

"""What a filter reads of a request: its body (parsed once), headers and query."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs

if TYPE_CHECKING:
    from hookbay_common.models import Event

JSON_MEDIA_TYPE: Final = "application/json"
JSON_SUFFIX: Final = "+json"


@dataclass(frozen=True, slots=True)
class Subject:
    """One request as filters see it. Built once per event and shared by every route's filter.

    ``body``: the parsed JSON value when the body is JSON, else its text (UTF-8, invalid bytes
    replaced); ``body_is_json`` says which. ``headers``: names lowercased. ``query``: a
    parameter given once is a string, a repeated one the list of its values in order.
    ``from_request`` builds it from a request; built directly, it takes values already in
    that form (plain dicts, lowercase header names)."""

    body: object
    headers: dict[str, str] = field(default_factory=dict)
    query: dict[str, str | list[str]] = field(default_factory=dict)
    body_is_json: bool = True

    @classmethod
    def from_request(
        cls,
        body: bytes,
        content_type: str | None,
        headers: Mapping[str, str],
        query: Mapping[str, str | list[str]],
    ) -> Subject:
        """The body is JSON when it parses as JSON (UTF-8, no ``NaN``/``Infinity``, nested
        no deeper than the parser allows) and either the content type is JSON
        (``application/json`` or any ``+json`` type) or the body is an object or an array
        (senders that mislabel JSON, such as ``text/plain`` from AWS SNS). Everything else is
        text."""
        parsed = parse_json_body(body, content_type)
        if parsed is _NOT_JSON:
            text: object = body.decode("utf-8", errors="replace")
            return cls(text, lower_names(headers), normal_query(query), body_is_json=False)
        return cls(parsed, lower_names(headers), normal_query(query), body_is_json=True)


_NOT_JSON: Final = object()


def event_subject(event: Event) -> Subject:
    """What filters read of a captured event: its body, headers and query string (parameters
    without a value count as the empty string)."""
    query = parse_qs(event.query or "", keep_blank_values=True)
    return Subject.from_request(event.body, event.content_type, event.request_headers, query)


def is_json_media_type(content_type: str | None) -> bool:
    if not content_type:
        return False
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == JSON_MEDIA_TYPE or media_type.endswith(JSON_SUFFIX)


def parse_json_body(body: bytes, content_type: str | None) -> object:
    """The body's JSON value, or ``_NOT_JSON``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return _NOT_JSON
    text = text.removeprefix("\ufeff")
    if not is_json_media_type(content_type) and text.lstrip()[:1] not in ("{", "["):
        return _NOT_JSON
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        # RecursionError: nested deeper than the parser's recursion limit; kept as text
        return _NOT_JSON


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def lower_names(headers: Mapping[str, str]) -> dict[str, str]:
    """Header names lowercased; two names that differ only in case are joined with ``", "``."""
    lowered: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        lowered[key] = f"{lowered[key]}, {value}" if key in lowered else value
    return lowered


def normal_query(query: Mapping[str, str | list[str]]) -> dict[str, str | list[str]]:
    """A parameter with one value is that string (``parse_qs`` gives lists); with none, absent."""
    normal: dict[str, str | list[str]] = {}
    for name, value in query.items():
        if isinstance(value, str):
            normal[name] = value
        elif len(value) == 1:
            normal[name] = value[0]
        elif value:
            normal[name] = list(value)
    return normal

"""What a handler returned, checked: a pure function from the output's JSON text to the request
to deliver or the reason it cannot be delivered."""

from __future__ import annotations

import json
import re
from typing import Any

from hookbay_sandbox.model import TransformError, TransformRequest

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_FORBIDDEN_IN_VALUE = re.compile(r"[\r\n\x00]")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _invalid(message: str) -> TransformError:
    return TransformError("invalid_output", message)


def _headers(value: Any) -> dict[str, str] | TransformError:
    if not isinstance(value, dict):
        return _invalid(f"request.headers must be an object, not {_kind(value)}")
    for name, item in value.items():
        if not _TOKEN.match(name):
            return _invalid(f"request.headers has a name that is not a header name: {name!r}")
        if not isinstance(item, str):
            return _invalid(f"request.headers[{name!r}] must be a string, not {_kind(item)}")
        if _FORBIDDEN_IN_VALUE.search(item):
            return _invalid(f"request.headers[{name!r}] holds a line break or NUL")
    return value


def validate(
    output_json: str, body_json: str, output_bytes: int
) -> TransformRequest | TransformError:
    """The request in ``output_json`` (its ``headers``, ``query`` and ``path``) and
    ``body_json``, or why it is not one: ``headers`` maps header names to strings without line
    breaks, ``query`` and ``path`` are strings (``path`` starting with ``/``), the body is JSON
    text as the engine wrote it (kept as text, not parsed here), the two at most
    ``output_bytes`` as UTF-8."""
    size = len(output_json) + len(body_json)
    if size > output_bytes or len(output_json.encode()) + len(body_json.encode()) > output_bytes:
        return _invalid(f"the returned request is larger than {output_bytes} bytes as JSON")
    if not body_json:
        return _invalid("the returned request has no body")
    try:
        data = json.loads(output_json)
    except ValueError:
        return _invalid("the returned request is not JSON")
    if not isinstance(data, dict):
        return _invalid(f"the handler must return the request object, not {_kind(data)}")
    for key in ("headers", "query", "path"):
        if key not in data:
            return _invalid(f"the returned request has no {key}")
    headers = _headers(data["headers"])
    if isinstance(headers, TransformError):
        return headers
    for key in ("query", "path"):
        if not isinstance(data[key], str):
            return _invalid(f"request.{key} must be a string, not {_kind(data[key])}")
    if not data["path"].startswith("/"):
        return _invalid("request.path must start with /")
    return TransformRequest(headers, query=data["query"], path=data["path"], body_json=body_json)

"""Guards for values a GET handshake echoes or signs: only short tokens of a conservative
alphabet, so the endpoint never reflects markup nor signs a JSON body for a stranger."""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import parse_qs

_TOKEN: Final = re.compile(r"[A-Za-z0-9._~+/=-]{1,256}")


def safe_token(value: str | None) -> bool:
    return value is not None and _TOKEN.fullmatch(value) is not None


def query_value(query_string: str, name: str) -> str | None:
    """The single value of ``name`` in the query; ``None`` when absent or repeated."""
    values = parse_qs(query_string, keep_blank_values=True).get(name)
    return values[0] if values is not None and len(values) == 1 else None

"""Helpers shared by the repositories for document shapes MongoDB and FerretDB both accept."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any, Final, TypeVar

from hookbay_common.models import BodyEncoding, body_from_text, body_to_text

T = TypeVar("T")
LOOKUP_CONCURRENCY: Final = 8
"""Parallel single-document look-ups; below the connection pool (16) so writes keep room."""


async def gather_limited(calls: Iterable[Awaitable[T]], limit: int = LOOKUP_CONCURRENCY) -> list[T]:
    """Await ``calls`` at most ``limit`` at a time; the results in the order of ``calls``."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Awaitable[T]) -> T:
        async with gate:
            return await call

    return await asyncio.gather(*(one(c) for c in calls))


def headers_to_document(headers: dict[str, str]) -> list[dict[str, str]]:
    """Headers as ``{"name", "value"}`` documents: header names may contain ``.`` or start with
    ``$``, which document keys may not, and FerretDB v1 stores no nested arrays (pairs)."""
    return [{"name": name, "value": value} for name, value in headers.items()]


def headers_from_document(entries: list[dict[str, str]]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in entries}


def body_to_document(field: str, body: bytes) -> dict[str, str]:
    """``{field: text, field_encoding: "utf8" | "base64"}``: readable text where the bytes allow."""
    text, encoding = body_to_text(body)
    return {field: text, f"{field}_encoding": encoding.value}


def body_from_document(doc: dict[str, Any], field: str) -> bytes:
    """Pop both fields written by ``body_to_document`` from ``doc`` and return the exact bytes."""
    return body_from_text(doc.pop(field), BodyEncoding(doc.pop(f"{field}_encoding")))

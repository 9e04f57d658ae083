"""Helpers shared by the repositories for document shapes MongoDB and FerretDB both accept."""

from __future__ import annotations

from typing import Any

from hookbay_common.models import BodyEncoding, body_from_text, body_to_text


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

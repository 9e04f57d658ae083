"""Helpers shared by the repositories for document shapes MongoDB and FerretDB both accept."""

from __future__ import annotations


def headers_to_document(headers: dict[str, str]) -> list[dict[str, str]]:
    """Headers as ``{"name", "value"}`` documents: header names may contain ``.`` or start with
    ``$``, which document keys may not, and FerretDB v1 stores no nested arrays (pairs)."""
    return [{"name": name, "value": value} for name, value in headers.items()]


def headers_from_document(entries: list[dict[str, str]]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in entries}

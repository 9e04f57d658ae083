"""Writes in commands small enough for FerretDB v1, and idempotent inserts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pymongo.errors import BulkWriteError

from hookbay_common.db.documents import gather_limited

BULK_CHUNK: Final = 16
"""Statements per write command. FerretDB v1.24 keeps one PostgreSQL connection per statement that
matched a document until the whole command ends (``msg_update.go``), so one command with about
50 matching statements exhausts its pool and hangs the server (docs/ferretdb-backends.md)."""


async def _bulk_write(collection: Any, operations: Sequence[Any]) -> None:
    """``operations`` in order, as consecutive commands of at most ``BULK_CHUNK`` statements."""
    for start in range(0, len(operations), BULK_CHUNK):
        await collection.bulk_write(operations[start : start + BULK_CHUNK], ordered=True)


Statement = tuple[dict[str, Any], dict[str, Any], bool]
"""An update: filter, update, upsert."""


async def _insert_or_upsert(
    collection: Any, docs: Sequence[dict[str, Any]], upserts: Sequence[Sequence[Statement]]
) -> list[int]:
    """Store ``docs``: inserted in chunks, which needs no lookup. The documents of a chunk that
    met a stored document (a record consumed again, an event's status stub) are written again as
    ``upserts[i]`` (idempotent statements, in order), ``LOOKUP_CONCURRENCY`` documents at a time;
    only those: an unordered insert goes on past a duplicate on MongoDB and on FerretDB v1.24
    alike (measured), and when the answer's counts do not add up the whole chunk goes this way.
    The indexes of the documents that went that way.

    After a store outage the recorder reads attempts ahead of their events, so most events meet
    a stub: written one document at a time for the whole chunk, a 2,000-record batch took 17 s
    (the chaos suite's ``store-read-only`` scenario)."""
    slow: list[int] = []
    for start in range(0, len(docs), BULK_CHUNK):
        chunk = docs[start : start + BULK_CHUNK]
        try:
            await collection.insert_many(chunk, ordered=False)
        except BulkWriteError as exc:
            failed = sorted({start + int(e["index"]) for e in exc.details.get("writeErrors", [])})
            if exc.details.get("nInserted", -1) + len(failed) != len(chunk):
                failed = list(range(start, start + len(chunk)))  # cannot tell: all again
            # one command each: a refused one raises its own error (a duplicate request id)
            await gather_limited(_upsert(collection, upserts[index]) for index in failed)
            slow.extend(failed)
    return slow


async def _upsert(collection: Any, statements: Sequence[Statement]) -> None:
    for query, update, upsert in statements:
        await collection.update_one(query, update, upsert=upsert)

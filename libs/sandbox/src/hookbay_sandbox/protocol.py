"""Frames between the pool and a worker, over the worker's stdin and stdout pipes.

A frame is a big-endian ``u32`` header length, a ``u32`` part count, the header (a JSON
object), then each part as a ``u32`` length and its bytes. Parts carry what is already text
for the engine (the code, the request's JSON, the env's JSON, the output's JSON), so nothing
large is encoded twice. JSON rather than msgpack: the engine's input and output are JSON text
anyway, and the header is a handful of fields.

- ready (worker → pool, once): ``{"op": "ready", "engine": name}``
- run (pool → worker): ``{"op": "run", "limits": {...}}`` + [code, request JSON, env JSON]
- check (pool → worker): ``{"op": "check", "limits": {...}}`` + [code]
- answer (worker → pool): ``{"ok": bool, "error": {...} | null, "logs": [...], "cpu_ms": n}``
  + [the returned headers, query and path as JSON, the returned body as JSON] when ``ok``
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any, BinaryIO

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Larger than any legal frame (a 4.5 MB request, 64 KiB of code, a 5 MiB answer, the logs);
a peer announcing more is broken."""

_HEAD = struct.Struct(">II")
_PART = struct.Struct(">I")


class ProtocolError(Exception):
    """A frame that cannot be read: a worker in that state is killed."""


def encode(header: dict[str, Any], parts: list[bytes] | tuple[bytes, ...] = ()) -> bytes:
    head = json.dumps(header, separators=(",", ":")).encode()
    chunks = [_HEAD.pack(len(head), len(parts)), head]
    for part in parts:
        chunks += [_PART.pack(len(part)), part]
    return b"".join(chunks)


def _check_size(size: int, total: int) -> int:
    total += size
    if total > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame over {MAX_FRAME_BYTES} bytes")
    return total


def _header(raw: bytes) -> dict[str, Any]:
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise ProtocolError("unreadable frame header") from exc
    if not isinstance(header, dict):
        raise ProtocolError("frame header is not an object")
    return header


async def read(stream: asyncio.StreamReader) -> tuple[dict[str, Any], list[bytes]]:
    """One frame from ``stream``; ``asyncio.IncompleteReadError`` at end of stream."""
    head_len, count = _HEAD.unpack(await stream.readexactly(_HEAD.size))
    total = _check_size(head_len, 0)
    header = _header(await stream.readexactly(head_len))
    parts = []
    for _ in range(count):
        (size,) = _PART.unpack(await stream.readexactly(_PART.size))
        total = _check_size(size, total)
        parts.append(await stream.readexactly(size))
    return header, parts


def _exactly(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if data is None or len(data) != size:
        raise EOFError
    return data


def read_blocking(stream: BinaryIO) -> tuple[dict[str, Any], list[bytes]]:
    """One frame from a blocking ``stream`` (the worker's stdin); ``EOFError`` at its end."""
    head_len, count = _HEAD.unpack(_exactly(stream, _HEAD.size))
    total = _check_size(head_len, 0)
    header = _header(_exactly(stream, head_len))
    parts = []
    for _ in range(count):
        (size,) = _PART.unpack(_exactly(stream, _PART.size))
        total = _check_size(size, total)
        parts.append(_exactly(stream, size))
    return header, parts

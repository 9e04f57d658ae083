from __future__ import annotations

import asyncio
import io
import struct

import pytest

from hookbay_sandbox import protocol


def reader_of(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


class TestFrames:
    async def test_a_frame_round_trips_both_ways(self) -> None:
        frame = protocol.encode({"op": "run", "n": 1}, (b"code", b"", "é".encode()))

        assert await protocol.read(reader_of(frame)) == (
            {"op": "run", "n": 1},
            [b"code", b"", "é".encode()],
        )
        assert protocol.read_blocking(io.BytesIO(frame)) == (
            {"op": "run", "n": 1},
            [b"code", b"", "é".encode()],
        )

    async def test_a_frame_over_the_maximum_is_refused(self) -> None:
        head = b"{}"
        frame = (
            struct.pack(">II", len(head), 1) + head + struct.pack(">I", protocol.MAX_FRAME_BYTES)
        )

        with pytest.raises(protocol.ProtocolError):
            await protocol.read(reader_of(frame))
        with pytest.raises(protocol.ProtocolError):
            protocol.read_blocking(io.BytesIO(frame))

    async def test_a_cut_frame_is_the_end_of_the_stream(self) -> None:
        frame = protocol.encode({"op": "ready"}, (b"x" * 10,))[:-3]

        with pytest.raises(asyncio.IncompleteReadError):
            await protocol.read(reader_of(frame))
        with pytest.raises(EOFError):
            protocol.read_blocking(io.BytesIO(frame))

    def test_a_header_that_is_not_an_object_is_refused(self) -> None:
        frame = struct.pack(">II", 2, 0) + b"[]"

        with pytest.raises(protocol.ProtocolError):
            protocol.read_blocking(io.BytesIO(frame))

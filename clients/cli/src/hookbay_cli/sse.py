"""A text/event-stream parser (the WHATWG "server-sent events" rules): feed it bytes as they
arrive, in chunks cut anywhere, and it yields the messages as a browser's EventSource would
dispatch them, with the last event id it would hold."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    event: str
    data: str
    last_id: str
    """The last event id after this message (it persists across messages without ``id:``)."""


class SseParser:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._has_data = False
        self.last_id = ""
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> Iterator[Message]:
        self._buffer += self._decoder.decode(chunk)
        while True:
            line, ending = self._next_line()
            if ending is None:
                return
            message = self._line(line)
            if message is not None:
                yield message

    def _next_line(self) -> tuple[str, str | None]:
        for index, char in enumerate(self._buffer):
            if char == "\n":
                line, self._buffer = self._buffer[:index], self._buffer[index + 1 :]
                return line, "\n"
            if char == "\r":
                if index + 1 == len(self._buffer):
                    return "", None  # a CR at the end: maybe half of a CRLF
                skip = 2 if self._buffer[index + 1] == "\n" else 1
                line, self._buffer = self._buffer[:index], self._buffer[index + skip :]
                return line, "\r"
        return "", None

    def _line(self, line: str) -> Message | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "id" and "\0" not in value:
            self.last_id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Message | None:
        if not self._has_data:
            self._event = ""
            return None
        message = Message(self._event or "message", "\n".join(self._data), self.last_id)
        self._event, self._data, self._has_data = "", [], False
        return message

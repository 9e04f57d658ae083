"""The HTTP/1.1 server protocol ingest runs under uvicorn: uvicorn's httptools protocol, with the
answers it gives before the app is reached in hookbay's JSON error shape.

- Bytes that are not an HTTP/1.1 request (a malformed or repeated ``Content-Length``, a bad
  chunk size, a bad request line or header) get ``400 {"error": "Invalid request", ...}`` and
  the connection is closed, instead of uvicorn's ``text/plain`` "Invalid HTTP request received.".
  When the app already answered the request (the garbage came after its body), the connection
  is only closed: a second response on the same request would corrupt the stream.
- After such an answer the connection is closed gracefully: writes are shut, what the client
  still sends is read and dropped for up to ``LINGER_SECONDS`` (a close with unread data would
  reset the connection and the client could lose the answer).
- A request head larger than ``max_header_bytes`` + ``HEAD_SLACK_BYTES`` as received is refused
  with 431 while it arrives, so a client cannot make the server buffer an unbounded head; the
  exact header limits are the app's (``Ingest._check_headers``). Only the head's own bytes
  count: a read that also holds earlier pipelined requests counts from where the head began
  (what the parser reported of it), every later read wholly.
- A protocol upgrade (``Connection: upgrade``) is never performed (uvicorn runs with
  ``ws="none"``): the request reaches the app as a plain request, and the app refuses one that
  carries a body (the parser handed that body to the would-be new protocol). The connection
  is closed after that answer: the parser reads nothing more once it saw an upgrade.
"""

from __future__ import annotations

import http
import json
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from hookbay_common.errors import HookbayError
from hookbay_common.logs import get_logger
from hookbay_ingest.errors import HeadersTooLarge, InvalidHttp
from hookbay_ingest.metrics import IngestMetrics
from hookbay_ingest.settings import IngestSettings

log = get_logger("hookbay.ingest.server")
HEAD_SLACK_BYTES = 16 * 1024
"""Room for the request line and the header lines' separators on top of ``max_header_bytes``."""
LINGER_SECONDS = 5.0


class IngestHttpProtocol(HttpToolsProtocol):
    """Configured per app by ``protocol_for`` (class attributes: uvicorn makes one instance per
    connection and passes only its own arguments)."""

    settings: ClassVar[IngestSettings]
    metrics: ClassVar[IngestMetrics]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._in_head = False
        self._refused = False
        self._messages = 0  # requests begun on this connection
        self._reported = 0  # bytes of the current head the parser handed over (URL, fields)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering after a refusal: read and drop
        self._unset_keepalive_if_required()
        messages = self._messages
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # no protocol switch: the app has the request (see the module docstring); the
            # parser stays paused after an upgrade, so the connection ends with the answer
            if self.cycle is not None:
                self.cycle.keep_alive = False
        except httptools.HttpParserError as exc:
            reason = str(exc) or type(exc).__name__
            log.info("invalid_http_request", reason=reason)
            self._refuse(InvalidHttp(reason))
            return
        if self._in_head:
            if self._messages == messages:  # the head was under way before: all of it is its
                self._head_bytes += len(data)
            else:  # the head began inside this read, after other requests' bytes
                self._head_bytes = self._reported
            if self._head_bytes > self.settings.max_header_bytes + HEAD_SLACK_BYTES:
                log.info("request_head_too_large", received=self._head_bytes)
                s = self.settings
                error = HeadersTooLarge(
                    s.max_header_bytes, s.max_header_count, self._head_bytes, len(self.headers)
                )
                error.headers["Connection"] = "close"
                self._refuse(error)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        self._messages += 1
        self._reported = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._reported += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._reported += len(name) + len(value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        self._refuse(InvalidHttp(msg))

    def _refuse(self, error: HookbayError) -> None:
        """Write ``error`` as the answer (unless the app already answered) and close."""
        self.metrics.invalid_http.labels(str(error.status_code)).inc()
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            self.transport.write(_response(error, self.server_state.default_headers))
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's request ends here: it may not answer too
            cycle.message_event.set()
        self._refused = True
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


def _response(error: HookbayError, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    body = json.dumps(error.body()).encode()
    phrase = http.HTTPStatus(error.status_code).phrase
    head = [f"HTTP/1.1 {error.status_code} {phrase}".encode()]
    head += [name + b": " + value for name, value in default_headers]
    head += [f"{name}: {value}".encode("latin-1") for name, value in error.headers.items()]
    head += [b"content-type: application/json", b"content-length: " + str(len(body)).encode()]
    return b"".join(line + b"\r\n" for line in head) + b"\r\n" + body


def protocol_for(settings: IngestSettings, metrics: IngestMetrics) -> type[IngestHttpProtocol]:
    """The protocol class to pass to uvicorn as ``http=``, bound to this app's limits and
    metrics."""
    return type(
        "BoundIngestHttpProtocol",
        (IngestHttpProtocol,),
        {"settings": settings, "metrics": metrics},
    )

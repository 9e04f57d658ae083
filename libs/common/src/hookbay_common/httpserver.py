"""The HTTP/1.1 server protocol hookbay's HTTP services run under uvicorn (ingest, the dashboard):
uvicorn's httptools protocol, with the answers it gives before the app is reached in hookbay's
JSON error shape. For services that depend on ``uvicorn[standard]`` (httptools); hookbay-common
itself does not, so only they import this module.

- Bytes that are not an HTTP/1.1 request (a malformed or repeated ``Content-Length``, a bad
  chunk size, a bad request line or header) get ``400 {"error": "Invalid request", ...}`` and
  the connection is closed, instead of uvicorn's ``text/plain`` "Invalid HTTP request received.".
  When the app already started its answer, the connection is only closed: a second response on
  the same request would corrupt the stream.
- After such an answer the connection is closed gracefully: writes are shut, what the client
  still sends is read and dropped for up to ``LINGER_SECONDS`` (a close with unread data would
  reset the connection and the client could lose the answer).
- No protocol upgrade is performed (the services run uvicorn with ``ws="none"``): a request
  asking for one (``Connection: upgrade``) reaches the app as a plain request, and the
  connection ends with its answer (the parser reads nothing more once it saw an upgrade).
  uvicorn's WebSocket handshake would otherwise answer such a request with a bodiless
  ``403 text/plain`` of its own.

A service subclasses ``JsonHttpProtocol`` (its own ``log``; ``received`` for checks on what
arrived, ``refuse`` to count refusals) and passes the class to ``uvicorn.run`` as ``http=``.
"""

from __future__ import annotations

import http
import json
from typing import Any, ClassVar

import httptools
import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from hookbay_common.httperrors import HookbayError, InvalidRequest
from hookbay_common.logs import get_logger

LINGER_SECONDS = 5.0


class InvalidHttp(InvalidRequest):
    """Bytes that are not an HTTP/1.1 request (answered by the server protocol, before the app):
    a malformed or repeated Content-Length, a bad chunk size, a bad request line or header."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the request is not valid HTTP/1.1 ({reason})")
        self.headers["Connection"] = "close"


class JsonHttpProtocol(HttpToolsProtocol):
    """uvicorn makes one instance per connection and passes only its own arguments: what a
    service configures goes in class attributes."""

    log: ClassVar[structlog.stdlib.BoundLogger] = get_logger("hookbay.http")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = False

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering after a refusal: read and drop
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # no protocol switch: the app has the request (see the module docstring); the
            # parser stays paused after an upgrade, so the connection ends with the answer
            if self.cycle is not None:
                self.cycle.keep_alive = False
        except httptools.HttpParserError as exc:
            reason = str(exc) or type(exc).__name__
            self.log.info("invalid_http_request", reason=reason)
            self.refuse(InvalidHttp(reason))
            return
        self.received(data)

    def received(self, data: bytes) -> None:
        """``data`` went through the parser without an error (its callbacks have run): for a
        subclass's checks on what arrived."""

    def send_400_response(self, msg: str) -> None:
        self.refuse(InvalidHttp(msg))

    def refuse(self, error: HookbayError) -> None:
        """Write ``error`` as the answer (unless the app already started answering) and close."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            self.transport.write(error_response(error, self.server_state.default_headers))
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's request ends here: it may not answer too
            cycle.message_event.set()
        self._refused = True
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


def error_response(error: HookbayError, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """``error`` as a whole HTTP/1.1 response: its status, the server's default headers, its
    own headers and its JSON body."""
    body = json.dumps(error.body()).encode()
    phrase = http.HTTPStatus(error.status_code).phrase
    head = [f"HTTP/1.1 {error.status_code} {phrase}".encode()]
    head += [name + b": " + value for name, value in default_headers]
    head += [f"{name}: {value}".encode("latin-1") for name, value in error.headers.items()]
    head += [b"content-type: application/json", b"content-length: " + str(len(body)).encode()]
    return b"".join(line + b"\r\n" for line in head) + b"\r\n" + body

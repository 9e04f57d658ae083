"""The HTTP/1.1 server protocol the dashboard runs under uvicorn: uvicorn's httptools protocol,
with the answers it gives before the app is reached in hookbay's JSON error shape (as ingest's,
``hookbay_ingest.server``).

- Bytes that are not an HTTP/1.1 request (a malformed or repeated ``Content-Length``, a bad
  chunk size, a bad request line or header) get ``400 {"error": "Invalid request", ...}`` and
  the connection is closed, instead of uvicorn's ``text/plain`` "Invalid HTTP request received.".
  When the app already started its answer, the connection is only closed: a second response on
  the same request would corrupt the stream. The writes are shut first and what the client
  still sends is read and dropped for up to ``LINGER_SECONDS`` (a close with unread data would
  reset the connection and the client could lose the answer).
- No protocol upgrade is performed (uvicorn runs with ``ws="none"``; the dashboard has no
  WebSocket route, the live tail is server-sent events): a request asking for one is served as
  a plain request, and the connection ends with its answer (the parser reads nothing more once
  it saw an upgrade). uvicorn's WebSocket handshake would otherwise answer such a request with a
  bodiless ``403 text/plain`` of its own.
"""

from __future__ import annotations

import http
import json

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from hookbay_common.logs import get_logger

log = get_logger("hookbay.dashboard.server")
LINGER_SECONDS = 5.0


class DashboardHttpProtocol(HttpToolsProtocol):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._refused = False

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering after a refusal: read and drop
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self.cycle is not None:
                self.cycle.keep_alive = False
        except httptools.HttpParserError as exc:
            reason = str(exc) or type(exc).__name__
            log.info("invalid_http_request", reason=reason)
            self.send_400_response(reason)

    def send_400_response(self, msg: str) -> None:
        """Answer ``400`` in JSON (unless the app already started answering) and close."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            self.transport.write(_invalid_request(msg, self.server_state.default_headers))
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's request ends here: it may not answer too
            cycle.message_event.set()
        self._refused = True
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


def _invalid_request(reason: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    body = json.dumps(
        {"error": "Invalid request", "message": f"the request is not valid HTTP/1.1 ({reason})"}
    ).encode()
    head = [f"HTTP/1.1 400 {http.HTTPStatus(400).phrase}".encode()]
    head += [name + b": " + value for name, value in default_headers]
    head += [b"connection: close", b"content-type: application/json"]
    head += [b"content-length: " + str(len(body)).encode()]
    return b"".join(line + b"\r\n" for line in head) + b"\r\n" + body

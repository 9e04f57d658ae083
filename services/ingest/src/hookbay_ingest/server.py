"""The HTTP/1.1 server protocol ingest runs under uvicorn: hookbay's (``hookbay_common.httpserver``,
as the dashboard's: malformed HTTP answered ``400`` in the JSON error shape and the connection
closed gracefully, no protocol upgrade performed), bounding request heads as they arrive.

- A request head larger than ``max_header_bytes`` + ``HEAD_SLACK_BYTES`` as received is refused
  with 431 while it arrives, so a client cannot make the server buffer an unbounded head; the
  exact header limits are the app's (``ReceivePipeline._check_headers``). Only the head's own bytes
  count: a read that also holds earlier pipelined requests counts from where the head began
  (what the parser reported of it), every later read wholly.
- A protocol upgrade (``Connection: upgrade``) reaches the app as a plain request, and the app
  refuses one that carries a body (the parser handed that body to the would-be new protocol).
- Every refusal (400 or 431) is counted in ``hookbay_ingest_invalid_http_total``, by status.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hookbay_common.errors import HookbayError
from hookbay_common.httpserver import JsonHttpProtocol
from hookbay_common.logs import get_logger
from hookbay_ingest.errors import HeadersTooLarge
from hookbay_ingest.metrics import IngestMetrics
from hookbay_ingest.settings import IngestSettings

HEAD_SLACK_BYTES = 16 * 1024
"""Room for the request line and the header lines' separators on top of ``max_header_bytes``."""


class IngestHttpProtocol(JsonHttpProtocol):
    """Configured per app by ``protocol_for`` (class attributes: uvicorn makes one instance per
    connection and passes only its own arguments)."""

    log = get_logger("hookbay.ingest.server")
    settings: ClassVar[IngestSettings]
    metrics: ClassVar[IngestMetrics]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._in_head = False
        self._began = False  # a request began since ``received`` last looked

    def received(self, data: bytes) -> None:
        began_here, self._began = self._began, False
        if not self._in_head:
            return
        if began_here:  # the head began inside this read, after other requests' bytes: count
            # what the parser handed over of it (uvicorn keeps it, reset per request)
            self._head_bytes = len(self.url) + sum(len(n) + len(v) for n, v in self.headers)
        else:  # the head was under way before: all of the read is its
            self._head_bytes += len(data)
        if self._head_bytes > self.settings.max_header_bytes + HEAD_SLACK_BYTES:
            self.log.info("request_head_too_large", received=self._head_bytes)
            s = self.settings
            error = HeadersTooLarge(
                s.max_header_bytes, s.max_header_count, self._head_bytes, len(self.headers)
            )
            error.headers["Connection"] = "close"
            self.refuse(error)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        self._began = True

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def refuse(self, error: HookbayError) -> None:
        self.metrics.invalid_http.labels(str(error.status_code)).inc()
        super().refuse(error)


def protocol_for(settings: IngestSettings, metrics: IngestMetrics) -> type[IngestHttpProtocol]:
    """The protocol class to pass to uvicorn as ``http=``, bound to this app's limits and
    metrics."""
    return type(
        "BoundIngestHttpProtocol",
        (IngestHttpProtocol,),
        {"settings": settings, "metrics": metrics},
    )

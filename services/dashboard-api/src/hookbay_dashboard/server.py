"""The HTTP/1.1 server protocol the dashboard runs under uvicorn: hookbay's
(``hookbay_common.httpserver``, as ingest's), so the answers given before the app is reached are
in hookbay's JSON error shape.

- Bytes that are not an HTTP/1.1 request get ``400 {"error": "Invalid request", ...}`` and the
  connection is closed gracefully, instead of uvicorn's ``text/plain`` "Invalid HTTP request
  received.".
- No protocol upgrade is performed (uvicorn runs with ``ws="none"``; the dashboard has no
  WebSocket route, the live tail is server-sent events): a request asking for one is served as
  a plain request, and the connection ends with its answer.
"""

from __future__ import annotations

from hookbay_common.httpserver import JsonHttpProtocol
from hookbay_common.logs import get_logger


class DashboardHttpProtocol(JsonHttpProtocol):
    log = get_logger("hookbay.dashboard.server")

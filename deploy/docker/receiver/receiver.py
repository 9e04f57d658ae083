"""A webhook destination for `make compose-check`: answers 200 to every POST and remembers it.

``GET /received`` lists what arrived (method, path, headers, body) as JSON, oldest first.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

received: list[dict[str, object]] = []
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with lock:
            received.append(
                {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body.decode("utf-8", "replace"),
                }
            )
        self._answer(200, {"ok": True})

    def do_GET(self) -> None:
        if self.path != "/received":
            self._answer(404, {"error": "not found"})
            return
        with lock:
            self._answer(200, received)

    def _answer(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


ThreadingHTTPServer(("0.0.0.0", 9000), Handler).serve_forever()

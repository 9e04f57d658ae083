"""The error hierarchy's HTTP-shaped base: each error carries the HTTP status and body it is
rendered with, and one handler per service renders ``body()``; the CLI prints ``message`` on one
line. A platform module: the protocol server, the SSRF guard and the secret box raise or render
these without knowing the domain. The domain's errors (``hookbay_common.errors``) subclass them.
"""

from __future__ import annotations

from typing import Any, ClassVar


class HookbayError(Exception):
    """Base class: ``status_code`` and ``error`` are per class, ``message`` and ``fields`` per case."""

    status_code: ClassVar[int] = 500
    error: ClassVar[str] = "Internal server error"

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        self.headers: dict[str, str] = {}
        """Response headers that belong to the error (``Retry-After``, ``Allow``)."""

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "message": self.message, **self.fields}


class InvalidRequest(HookbayError):
    status_code = 400
    error = "Invalid request"


class Unauthorized(HookbayError):
    status_code = 401
    error = "Unauthorized"


class Forbidden(HookbayError):
    status_code = 403
    error = "Forbidden"


class NotFound(HookbayError):
    status_code = 404
    error = "Not found"


class Conflict(HookbayError):
    status_code = 409
    error = "Conflict"


class ServiceUnavailable(HookbayError):
    status_code = 503
    error = "Service unavailable"


class ConfigurationError(HookbayError):
    """Operator configuration (settings, plans file) is invalid; raised at start-up."""

    error = "Configuration error"

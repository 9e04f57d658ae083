"""The one error hierarchy. Each error carries the HTTP status and body it is rendered with.

Services raise these (never ``HTTPException``); one handler per service renders ``body()``. The CLI
prints ``message`` on one line. A 5xx means a bug or an unavailable dependency, never a client mistake.
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


class UserNotFound(NotFound):
    error = "User not found"

    def __init__(self, username: str) -> None:
        super().__init__(f"no user named {username!r}", username=username)


class UserAlreadyExists(Conflict):
    error = "User already exists"

    def __init__(self, username: str) -> None:
        super().__init__(f"a user named {username!r} already exists", username=username)


class WebhookNotFound(NotFound):
    error = "Webhook not found"

    def __init__(self, username: str, webhook_name: str) -> None:
        super().__init__(
            f"user {username!r} has no webhook named {webhook_name!r}",
            username=username,
            webhookName=webhook_name,
        )


class WebhookAlreadyExists(Conflict):
    error = "Webhook already exists"

    def __init__(self, username: str, webhook_name: str) -> None:
        super().__init__(
            f"user {username!r} already has a webhook named {webhook_name!r}",
            username=username,
            webhookName=webhook_name,
        )


class PlanNotFound(InvalidRequest):
    error = "Unknown plan"

    def __init__(self, plan: str, known: list[str]) -> None:
        super().__init__(f"unknown plan {plan!r} (known: {', '.join(known)})", plan=plan)


class TokenNotFound(NotFound):
    error = "Token not found"

    def __init__(self, token_id: str) -> None:
        super().__init__(f"no API token {token_id!r}", tokenId=token_id)

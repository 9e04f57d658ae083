"""The receiving endpoint's errors, with the bodies of docs/owners/receiving.md, "Answers"."""

from __future__ import annotations

from hookbay_common.errors import (
    Forbidden,
    HookbayError,
    InvalidRequest,
    NotFound,
    ServiceUnavailable,
    Unauthorized,
)


class MethodNotAllowed(HookbayError):
    status_code = 405
    error = "Method not allowed"

    def __init__(self, method: str) -> None:
        super().__init__(f"{method} is not allowed here; send webhooks with POST")
        self.headers["Allow"] = "POST"


class InvalidPath(InvalidRequest):
    """A path segment that breaks the name grammar (400)."""


class NoSuchPath(NotFound):
    """A path outside ``/w/{username}/{webhook-name}``, ``/healthz``, ``/readyz``, ``/metrics``."""

    error = "Not found"

    def __init__(self, path: str) -> None:
        super().__init__(
            f"nothing at {path!r}; webhooks are received at POST /w/{{username}}/{{webhook-name}}"
        )


class UpgradeRefused(InvalidRequest):
    """A request that carries a body and asks to switch protocols (``Connection: upgrade`` with
    ``Upgrade: websocket`` or ``h2c``). The HTTP parser hands such a body to the new protocol,
    not to the request, so accepting it would store an empty body behind a 200."""

    def __init__(self, upgrade: str) -> None:
        super().__init__(
            f"a request with a body cannot ask for a protocol upgrade (Upgrade: {upgrade}); "
            "send it without the Upgrade header",
            upgrade=upgrade,
        )
        self.headers["Connection"] = "close"


class BodyIncomplete(InvalidRequest):
    """Fewer body bytes arrived than ``Content-Length`` declared (nothing is stored)."""

    def __init__(self, declared: int, received: int) -> None:
        super().__init__(
            f"Content-Length declared {declared} bytes but the body had {received}; "
            "nothing was stored"
        )
        self.headers["Connection"] = "close"


class HeadersTooLarge(HookbayError):
    """More header fields, or more header bytes (names plus values), than accepted (431)."""

    status_code = 431
    error = "Request header fields too large"

    def __init__(self, max_bytes: int, max_count: int, received_bytes: int, count: int) -> None:
        super().__init__(
            f"the request carries {count} header fields of {received_bytes} bytes; at most "
            f"{max_count} fields of {max_bytes} bytes in total (names and values) are accepted",
            maxHeaderBytes=max_bytes,
            maxHeaderCount=max_count,
        )


class UnknownUser(Forbidden):
    error = "User not found"

    def __init__(self, username: str) -> None:
        super().__init__(f"no user named {username!r}", username=username)


class WebhookInactive(Forbidden):
    error = "Webhook is not active"

    def __init__(self) -> None:
        super().__init__("This webhook has been deactivated")


class InvalidSignature(Unauthorized):
    """A request (or a handshake) that failed its webhook's verification; ``reason`` is one of
    ``hookbay_common.models.InvalidReason``."""

    error = "Invalid signature"

    def __init__(self, request_id: str, reason: str) -> None:
        super().__init__("Signature verification failed", requestId=request_id, reason=reason)


class PayloadTooLarge(HookbayError):
    status_code = 413
    error = "Payload too large"

    def __init__(self, limit: int, received: int | None) -> None:
        shown = _megabytes(received) if received is not None else f"more than {_megabytes(limit)}"
        super().__init__(
            f"the body exceeds the {_megabytes(limit)} limit; shrink it or split it",
            limit=_megabytes(limit),
            received=shown,
        )


class RateLimited(HookbayError):
    status_code = 429
    error = "Rate limit exceeded"

    def __init__(self, limit: str, plan: str, retry_after: int) -> None:
        super().__init__(
            f"too many requests for plan {plan!r}; retry in {retry_after} s",
            limit=limit,
            plan=plan,
            retryAfter=retry_after,
        )
        self.headers["Retry-After"] = str(retry_after)


class QueueUnavailable(ServiceUnavailable):
    def __init__(self, retry_after: int = 5) -> None:
        super().__init__(
            "the event could not be queued durably; nothing was stored, retry later",
            retryAfter=retry_after,
        )
        self.headers["Retry-After"] = str(retry_after)


def _megabytes(size: int) -> str:
    """Exact decimal megabytes, as the limit is stated: 4,500,000 → ``"4.5 MB"``,
    4,500,001 → ``"4.500001 MB"`` (never rounded onto the limit)."""
    return f"{size / 1_000_000:.6f}".rstrip("0").rstrip(".") + " MB"


class ConfigUnavailable(ServiceUnavailable):
    """A name missing from the configuration view could not be looked up in MongoDB."""

    def __init__(self, retry_after: int = 5) -> None:
        super().__init__(
            "the webhook's configuration cannot be read right now; nothing was stored, retry later",
            retryAfter=retry_after,
        )
        self.headers["Retry-After"] = str(retry_after)

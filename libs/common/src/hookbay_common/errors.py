"""The one error hierarchy. Each error carries the HTTP status and body it is rendered with.

Services raise these (never ``HTTPException``); one handler per service renders ``body()``. The CLI
prints ``message`` on one line. A 5xx means a bug or an unavailable dependency, never a client mistake.
The HTTP-shaped base classes live in ``hookbay_common.httperrors`` (platform) and are re-exported
here; this module adds the domain's errors.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hookbay_common.clock import isoformat
from hookbay_common.httperrors import (  # re-exported: the whole hierarchy is importable here
    ConfigurationError as ConfigurationError,
)
from hookbay_common.httperrors import (
    Conflict as Conflict,
)
from hookbay_common.httperrors import (
    Forbidden as Forbidden,
)
from hookbay_common.httperrors import (
    HookbayError as HookbayError,
)
from hookbay_common.httperrors import (
    InvalidRequest as InvalidRequest,
)
from hookbay_common.httperrors import (
    NotFound as NotFound,
)
from hookbay_common.httperrors import (
    ServiceUnavailable as ServiceUnavailable,
)
from hookbay_common.httperrors import (
    Unauthorized as Unauthorized,
)


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


class TooManyRequests(HookbayError):
    """429 with ``Retry-After``; ``retryAfter`` in the body, whole seconds >= 1."""

    status_code = 429
    error = "Too many requests"

    def __init__(self, message: str, retry_after: int, **fields: Any) -> None:
        super().__init__(message, retryAfter=retry_after, **fields)
        self.headers["Retry-After"] = str(retry_after)


class NotAuthenticated(Unauthorized):
    error = "Not authenticated"

    def __init__(self, message: str = "log in, or send an API token as 'Authorization: Bearer'"):
        super().__init__(message)
        self.headers["WWW-Authenticate"] = "Bearer"


class InvalidCredentials(Unauthorized):
    error = "Invalid credentials"

    def __init__(self) -> None:
        super().__init__("username or password is wrong")


class CsrfRejected(Forbidden):
    error = "CSRF check failed"

    def __init__(self) -> None:
        super().__init__(
            "a state-changing request made with the session cookie needs the X-CSRF-Token header "
            "returned by POST /auth/login and GET /me"
        )


class AdminRequired(Forbidden):
    error = "Admin role required"

    def __init__(self) -> None:
        super().__init__("this operation needs the admin role")


class EventNotFound(NotFound):
    error = "Event not found"

    def __init__(self, event_id: str) -> None:
        super().__init__(f"no event {event_id!r}", eventId=event_id)


class InvalidCursor(InvalidRequest):
    error = "Invalid cursor"

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"the cursor is not one this list returned ({reason}); start again without a cursor"
        )


class NothingToDeliverTo(Conflict):
    """A replay asked for while the webhook has no destination (deleted, or no forward URL)."""

    error = "Nothing to deliver to"


class EventRejected(Conflict):
    """A replay of an event refused by its signature check: such events are never forwarded."""

    error = "Event was rejected"

    def __init__(self, event_id: str, reason: str) -> None:
        super().__init__(
            f"event {event_id!r} was rejected ({reason}) and is never forwarded",
            eventId=event_id,
            rejectedReason=reason,
        )


class DeliveryNotFound(NotFound):
    error = "Delivery not found"

    def __init__(self, delivery_id: str) -> None:
        super().__init__(f"no delivery {delivery_id!r}", deliveryId=delivery_id)


class DeliveryNotRetryable(Conflict):
    """A delivery retry asked for while the delivery has nothing to retry (filtered, held,
    waiting already) or nowhere to go (its destination was deleted)."""

    error = "Delivery not retryable"

    def __init__(self, delivery_id: str, status: str, why: str) -> None:
        super().__init__(
            f"delivery {delivery_id!r} ({status}) is not retried: {why}",
            deliveryId=delivery_id,
            status=status,
        )


class ReplayJobNotFound(NotFound):
    error = "Replay job not found"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no replay job {job_id!r}", jobId=job_id)


class ReplayAlreadyRunning(Conflict):
    error = "Replay already running"

    def __init__(self, webhook_name: str, job_id: str) -> None:
        super().__init__(
            f"a replay of webhook {webhook_name!r}'s failed events is already running ({job_id})",
            webhookName=webhook_name,
            jobId=job_id,
        )


class LockHeld(Conflict):
    """Another process holds the named lock; ``holder`` and ``lease_until`` say who and until
    when its lease runs (it is renewed while that process works)."""

    error = "Lock held"

    def __init__(self, name: str, holder: str, lease_until: datetime) -> None:
        super().__init__(
            f"another {name} run holds the lock: {holder}, lease until {isoformat(lease_until)}",
            lock=name,
            holder=holder,
            leaseUntil=isoformat(lease_until),
        )
        self.holder = holder
        self.lease_until = lease_until


class LockLost(HookbayError):
    """The lease on the named lock lapsed and another process took it: this one must stop."""

    error = "Lock lost"

    def __init__(self, name: str, holder: str) -> None:
        super().__init__(
            f"the {name} lock was taken over while {holder} held it (its lease lapsed); stopped",
            lock=name,
            holder=holder,
        )


class InvalidField(InvalidRequest):
    """A field of the request body is refused for a reason the schema alone cannot tell (a
    name's grammar, a URL the SSRF guard refuses, a destination that does not exist, a filter
    the engine refuses). 422 with the API's validation body: ``detail`` lists each problem
    with its ``loc`` (``["body", <field>, ...]``), ``msg`` and ``type``."""

    status_code = 422

    def __init__(
        self,
        loc: tuple[str | int, ...],
        msg: str,
        kind: str = "value_error",
        **extra: Any,
    ) -> None:
        """``extra``: further keys of the ``detail`` entry (a code error's ``line`` and
        ``column``)."""
        where = ".".join(str(p) for p in loc)
        detail = [{"loc": ["body", *loc], "msg": msg, "type": kind, **extra}]
        super().__init__(f"{where}: {msg}", detail=detail)
        self.loc = loc


class PayloadTooLarge(HookbayError):
    """A field of the request body over its size limit: 413 with the validation body's
    ``detail`` (``loc``, ``msg``, ``type`` ``too_large``), like ``InvalidField``."""

    status_code = 413
    error = "Payload too large"

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        where = ".".join(str(p) for p in loc)
        detail = [{"loc": ["body", *loc], "msg": msg, "type": "too_large"}]
        super().__init__(f"{where}: {msg}", detail=detail)
        self.loc = loc


class TransformationNotFound(NotFound):
    error = "Transformation not found"

    def __init__(self, username: str, name: str) -> None:
        super().__init__(
            f"user {username!r} has no transformation named {name!r}",
            username=username,
            transformation=name,
        )


class TransformationAlreadyExists(Conflict):
    error = "Transformation already exists"

    def __init__(self, username: str, name: str) -> None:
        super().__init__(
            f"user {username!r} already has a transformation named {name!r}",
            username=username,
            transformation=name,
        )


class TransformationInUse(Conflict):
    """A deletion of a transformation that routes still run; ``routes`` names each as
    ``webhook/route``."""

    error = "Transformation in use"

    def __init__(self, name: str, routes: list[str]) -> None:
        super().__init__(
            f"transformation {name!r} is used by route(s) {', '.join(routes)}: remove it from "
            "them (transform: null) or point them at another transformation first",
            transformation=name,
            routes=routes,
        )


class DestinationNotFound(NotFound):
    error = "Destination not found"

    def __init__(self, username: str, name: str) -> None:
        super().__init__(
            f"user {username!r} has no destination named {name!r}",
            username=username,
            destination=name,
        )


class DestinationAlreadyExists(Conflict):
    error = "Destination already exists"

    def __init__(self, username: str, name: str) -> None:
        super().__init__(
            f"user {username!r} already has a destination named {name!r}",
            username=username,
            destination=name,
        )


class DestinationInUse(Conflict):
    """A deletion of a destination that routes still deliver to; ``routes`` names each as
    ``webhook/route``."""

    error = "Destination in use"

    def __init__(self, name: str, routes: list[str]) -> None:
        super().__init__(
            f"destination {name!r} is used by route(s) {', '.join(routes)}: delete them or "
            "point them at another destination first",
            destination=name,
            routes=routes,
        )


class ForwardUrlManaged(Conflict):
    """A change the webhook's ``forward_url`` makes, asked of its route or destination:
    editing or deleting the route ``forward_url``, or changing its destination's URL or
    deleting it (``docs/owners/routes.md``, "forward_url")."""

    error = "Managed by forward_url"

    def __init__(self, webhook_name: str, what: str) -> None:
        super().__init__(
            f"{what} is webhook {webhook_name!r}'s forward_url: change or remove the webhook's "
            "forward_url instead",
            webhookName=webhook_name,
        )


class RouteNotFound(NotFound):
    error = "Route not found"

    def __init__(self, webhook_name: str, route: str) -> None:
        super().__init__(
            f"webhook {webhook_name!r} has no route named {route!r}",
            webhookName=webhook_name,
            route=route,
        )


class RouteAlreadyExists(Conflict):
    error = "Route already exists"

    def __init__(self, webhook_name: str, route: str) -> None:
        super().__init__(
            f"webhook {webhook_name!r} already has a route named {route!r}",
            webhookName=webhook_name,
            route=route,
        )


class RouteLimitReached(Conflict):
    error = "Route limit reached"

    def __init__(self, webhook_name: str, limit: int) -> None:
        super().__init__(
            f"webhook {webhook_name!r} has {limit} routes, the most a webhook may have",
            webhookName=webhook_name,
            limit=limit,
        )


class ConcurrentChange(Conflict):
    """A read-modify-write lost to other writers every time it was tried: send it again."""

    error = "Concurrent change"


class IssueNotFound(NotFound):
    error = "Issue not found"

    def __init__(self, issue_id: str) -> None:
        super().__init__(f"no issue {issue_id!r}", issue=issue_id)


class AlertChannelNotFound(NotFound):
    error = "Alert channel not found"

    def __init__(self, channel_id: str) -> None:
        super().__init__(f"no alert channel {channel_id!r}", channel=channel_id)


class IssueStateConflict(Conflict):
    error = "Issue state conflict"

    def __init__(self, issue_id: str, status: str, action: str) -> None:
        super().__init__(f"issue {issue_id!r} is {status}: it cannot be {action}", issue=issue_id)

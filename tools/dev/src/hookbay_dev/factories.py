"""Plain ``create_*`` factories for records, with unique names so tests never collide."""

from __future__ import annotations

import uuid
from typing import Any

from hookbay_common.clock import utcnow
from hookbay_common.ids import IdPrefix, derived_id, new_id
from hookbay_common.models import (
    Attempt,
    AttemptTrigger,
    Delivery,
    DeliveryStatus,
    Destination,
    Event,
    Role,
    Route,
    User,
    Webhook,
)
from hookbay_common.routing.tasks import DestinationTask, delivery_id

TEST_SECRET_KEY = "test-only-secret-key-4f1c2a9be07d43c1a5c2"


def unique_name(prefix: str = "t") -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def create_user(**overrides: Any) -> User:
    now = utcnow()
    fields: dict[str, Any] = {
        "username": unique_name("u"),
        "plan": "free",
        "role": Role.USER,
        "created_at": now,
        "updated_at": now,
    }
    return User(**{**fields, **overrides})


def create_webhook(**overrides: Any) -> Webhook:
    now = utcnow()
    fields: dict[str, Any] = {
        "id": new_id(IdPrefix.WEBHOOK),
        "username": unique_name("u"),
        "name": unique_name("hook-"),
        "created_at": now,
        "updated_at": now,
    }
    return Webhook(**{**fields, **overrides})


def create_destination(**overrides: Any) -> Destination:
    now = utcnow()
    fields: dict[str, Any] = {
        "id": new_id(IdPrefix.DESTINATION),
        "username": unique_name("u"),
        "name": unique_name("dest-"),
        "url": "http://127.0.0.1:9/destination",
        "created_at": now,
        "updated_at": now,
    }
    return Destination(**{**fields, **overrides})


def create_route(**overrides: Any) -> Route:
    now = utcnow().replace(microsecond=0)  # as the store keeps it (milliseconds)
    fields: dict[str, Any] = {
        "id": new_id(IdPrefix.ROUTE),
        "name": unique_name("route-"),
        "destination": "billing",
        "created_at": now,
        "updated_at": now,
    }
    return Route(**{**fields, **overrides})


def create_event(**overrides: Any) -> Event:
    fields: dict[str, Any] = {
        "id": new_id(IdPrefix.EVENT),
        "request_id": new_id(IdPrefix.REQUEST),
        "webhook_id": new_id(IdPrefix.WEBHOOK),
        "username": "alice",
        "webhook_name": "orders",
        "client_ip": "203.0.113.7",
        "request_headers": {"content-type": "application/json", "user-agent": "test"},
        "body": b'{"ok": true}',
        "content_type": "application/json",
        "forward_url": "http://127.0.0.1:9/hook",
        "created_at": utcnow(),
    }
    return Event(**{**fields, **overrides})


def create_attempt(event: Event, **overrides: Any) -> Attempt:
    fields: dict[str, Any] = {
        "id": new_id(IdPrefix.ATTEMPT),
        "event_id": event.id,
        "username": event.username,
        "webhook_id": event.webhook_id,
        "chain_id": new_id(IdPrefix.CHAIN),
        "number": 1,
        "trigger": AttemptTrigger.INITIAL,
        "url": "http://127.0.0.1:9/hook",
        "started_at": utcnow(),
        "status_code": 200,
        "response_headers": {"content-type": "text/plain"},
        "response_body": b"ok",
        "latency_ms": 3.5,
    }
    return Attempt(**{**fields, **overrides})


def create_destination_task(**overrides: Any) -> DestinationTask:
    """A first attempt over route ``rt_1`` to destination ``dst_1`` of a new event (``event``
    overrides it), due at once."""
    event = overrides.pop("event", None) or create_event()
    route = overrides.get("route", "rt_1")
    delivery = overrides.get("delivery_id", delivery_id(event.id, route, event.id))
    fields: dict[str, Any] = {
        "delivery_id": delivery,
        "chain_id": derived_id(IdPrefix.CHAIN, delivery),
        "destination": "dst_1",
        "route": route,
        "trigger": AttemptTrigger.INITIAL,
        "attempt": 1,
        "not_before": event.created_at,
        "event": event,
    }
    return DestinationTask(**{**fields, **overrides})


def create_delivery(event: Event, **overrides: Any) -> Delivery:
    """The delivery of ``event`` over route ``billing`` (``route`` overrides it) to the
    destination ``billing-api``, ``delivering`` now."""
    route = overrides.get("route", "billing")
    fields: dict[str, Any] = {
        "id": delivery_id(event.id, route, event.id),
        "event_id": event.id,
        "webhook_id": event.webhook_id,
        "username": event.username,
        "route": route,
        "destination": f"{route}-api",
        "status": DeliveryStatus.DELIVERING,
        "at": utcnow(),
    }
    return Delivery(**{**fields, **overrides})

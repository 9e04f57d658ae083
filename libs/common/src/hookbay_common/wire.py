"""Kafka (de)serialisation. Values are msgpack maps carrying a schema tag and version.

msgpack keeps the body as raw bytes (no base64 inflation of a 4.5 MB body) and is an order of
magnitude cheaper than JSON for the envelope; the body bytes round-trip exactly.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

import msgpack

from hookbay_common.models import (
    Attempt,
    AttemptTrigger,
    Delivery,
    DeliveryStatus,
    DeliveryTask,
    Event,
)
from hookbay_common.routing.tasks import DestinationTask

EVENT_SCHEMA = "event/1"
ENVELOPE_OVERHEAD_BYTES = 16 * 1024
"""Room for everything in a Kafka record that is neither the body nor a copy of header bytes:
ids, names, status fields, the destination URL (twice in a delivery task, at most 2,048 bytes
each), the record key, dead-letter headers and the record batch framing."""
ATTEMPT_SCHEMA = "attempt/1"
_ATTEMPT_ROUTING = ("delivery_id", "route", "destination", "transform")
"""Left out when ``None``: an attempt of the ``forward_url`` path keeps its old shape, which
recorders and stats processors of earlier versions read."""
DELIVERY_SCHEMA = "delivery/1"
_OMITTED_WHEN_DEFAULT = (
    ("verification", None),
    ("handshake", None),
    ("routed", False),
    ("query", None),
)
"""Event fields left out at their default: an event without them keeps the shape recorders and
stats processors of earlier versions read."""
TASK_SCHEMA = "task/1"
DESTINATION_TASK_SCHEMA = "destination-task/1"
ROUTE_REQUEST_SCHEMA = "route-request/1"


class WireError(ValueError):
    """A message that is not a hookbay record of the expected schema (poison: dead-letter it)."""


def _datetime_to_wire(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def _datetime_from_wire(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, tz=UTC)


def _pack(schema: str, fields: dict[str, Any]) -> bytes:
    packed = msgpack.packb({"schema": schema, **fields}, use_bin_type=True)
    assert isinstance(packed, bytes)
    return packed


def _unpack(schema: str, value: bytes) -> dict[str, Any]:
    try:
        fields = msgpack.unpackb(value, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise WireError(f"not a msgpack message: {exc}") from None
    if not isinstance(fields, dict) or fields.pop("schema", None) != schema:
        raise WireError(f"not a {schema} message")
    return fields


def _event_to_fields(event: Event) -> dict[str, Any]:
    fields = event.model_dump(mode="python")
    fields["created_at"] = _datetime_to_wire(event.created_at)
    for optional, default in _OMITTED_WHEN_DEFAULT:
        if fields[optional] is default:
            del fields[optional]
    return fields


def _event_from_fields(fields: dict[str, Any]) -> Event:
    fields["created_at"] = _datetime_from_wire(fields["created_at"])
    return Event.model_validate(fields)


def max_event_bytes(*, body_bytes: int, header_bytes: int, header_count: int) -> int:
    """The most a Kafka record carrying an event (the event itself, a delivery task or a dead
    letter wrapping it) can take for a request of at most ``body_bytes`` of body and
    ``header_count`` header fields of ``header_bytes`` (names plus values) in total.

    The body travels as msgpack ``bin``: its own size plus 5 bytes, whether it is UTF-8 or not
    (no base64 on the wire). Header bytes are decoded as latin-1 and packed as UTF-8, so each
    can take 2 bytes; they appear in ``request_headers`` (repeated names joined with ``", "``,
    every name and value with a 5-byte msgpack prefix) and again in ``content_type`` and
    ``client_ip`` (copies of single header values, together at most ``header_bytes``)."""
    headers = 2 * (header_bytes + 2 * header_count) + 10 * header_count
    copies = 2 * header_bytes
    return body_bytes + 5 + headers + copies + ENVELOPE_OVERHEAD_BYTES


def encode_event(event: Event) -> bytes:
    return _pack(EVENT_SCHEMA, _event_to_fields(event))


def decode_event(value: bytes) -> Event:
    fields = _unpack(EVENT_SCHEMA, value)
    try:
        return _event_from_fields(fields)
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"invalid {EVENT_SCHEMA} message: {exc}") from None


def peek_event(value: bytes) -> dict[str, Any]:
    """An event's fields as sent, unvalidated (``created_at`` in Unix milliseconds): for readers
    that count events and need a few fields, not the model (``decode_event`` costs ~10x more)."""
    return _unpack(EVENT_SCHEMA, value)


def encode_task(task: DeliveryTask) -> bytes:
    fields = task.model_dump(mode="python", exclude={"event"})
    fields["event"] = _event_to_fields(task.event)
    fields["not_before"] = _datetime_to_wire(task.not_before)
    return _pack(TASK_SCHEMA, fields)


def decode_task(value: bytes) -> DeliveryTask:
    fields = _unpack(TASK_SCHEMA, value)
    try:
        fields["event"] = _event_from_fields(fields["event"])
        fields["not_before"] = _datetime_from_wire(fields["not_before"])
        return DeliveryTask.model_validate(fields)
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"invalid {TASK_SCHEMA} message: {exc}") from None


def encode_attempt(attempt: Attempt) -> bytes:
    fields = attempt.model_dump(mode="python")
    fields["started_at"] = _datetime_to_wire(attempt.started_at)
    if attempt.next_retry_at is not None:
        fields["next_retry_at"] = _datetime_to_wire(attempt.next_retry_at)
    for optional in _ATTEMPT_ROUTING:
        if fields[optional] is None:
            del fields[optional]
    return _pack(ATTEMPT_SCHEMA, fields)


def peek_attempt(value: bytes) -> dict[str, Any]:
    """An attempt's fields as sent, unvalidated (``started_at`` in Unix milliseconds)."""
    return _unpack(ATTEMPT_SCHEMA, value)


def decode_attempt(value: bytes) -> Attempt:
    return _attempt_from_fields(_unpack(ATTEMPT_SCHEMA, value))


def _attempt_from_fields(fields: dict[str, Any]) -> Attempt:
    try:
        fields["started_at"] = _datetime_from_wire(fields["started_at"])
        if fields.get("next_retry_at") is not None:
            fields["next_retry_at"] = _datetime_from_wire(fields["next_retry_at"])
        return Attempt.model_validate(fields)
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"invalid {ATTEMPT_SCHEMA} message: {exc}") from None


def encode_delivery(delivery: Delivery) -> bytes:
    """A delivery record (``delivery/1``) for ``Topics.attempts``, keyed by its event id like
    the event's attempts, so one recorder writes everything that moves one event's status.
    ``reason``, ``chain_id`` and ``transform`` are left out when ``None``."""
    fields: dict[str, Any] = {
        "delivery_id": delivery.id,
        "event_id": delivery.event_id,
        "webhook_id": delivery.webhook_id,
        "username": delivery.username,
        "route": delivery.route,
        "destination": delivery.destination,
        "status": delivery.status.value,
        "at": _datetime_to_wire(delivery.at),
    }
    if delivery.reason is not None:
        fields["reason"] = delivery.reason
    if delivery.chain is not None:
        fields["chain_id"] = delivery.chain
    if delivery.transform is not None:
        fields["transform"] = delivery.transform.model_dump(mode="python")
    return _pack(DELIVERY_SCHEMA, fields)


def decode_delivery(value: bytes) -> Delivery:
    return _delivery_from_fields(_unpack(DELIVERY_SCHEMA, value))


def _delivery_from_fields(fields: dict[str, Any]) -> Delivery:
    try:
        return Delivery(
            id=_text(fields["delivery_id"]),
            event_id=_text(fields["event_id"]),
            webhook_id=_text(fields["webhook_id"]),
            username=_text(fields["username"]),
            route=_text(fields["route"]),
            destination=_text(fields["destination"]),
            status=DeliveryStatus(fields["status"]),
            reason=fields.get("reason"),
            at=_datetime_from_wire(fields["at"]),
            chain=fields.get("chain_id"),
            transform=fields.get("transform"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"invalid {DELIVERY_SCHEMA} message: {exc}") from None


def decode_attempts_record(value: bytes) -> Attempt | Delivery:
    """A record of ``Topics.attempts``: an attempt (``attempt/1``) or a delivery record
    (``delivery/1``), read with one unpacking."""
    try:
        fields = msgpack.unpackb(value, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise WireError(f"not a msgpack message: {exc}") from None
    schema = fields.pop("schema", None) if isinstance(fields, dict) else None
    if schema == ATTEMPT_SCHEMA:
        return _attempt_from_fields(fields)
    if schema == DELIVERY_SCHEMA:
        return _delivery_from_fields(fields)
    raise WireError(f"not a {ATTEMPT_SCHEMA} or {DELIVERY_SCHEMA} message")


def is_delivery_record(value: bytes) -> bool:
    """Whether a record of ``Topics.attempts`` is a delivery record, without unpacking it: its
    map has fewer than 16 entries (a one-byte header) and the schema first, as ``_pack`` writes
    it."""
    return value[1 : 1 + len(_DELIVERY_PREFIX)] == _DELIVERY_PREFIX


_DELIVERY_PREFIX: Final = _pack(DELIVERY_SCHEMA, {})[1:]


def encode_destination_task(task: DestinationTask) -> bytes:
    """A ``DestinationTask`` as a msgpack map. ``event_id``, ``owner`` and ``destination`` sit at
    the top, beside the inline event, so readers that route or count (``peek_destination_task``)
    never validate the event. Its size is the event's (``max_event_bytes``) plus a few ids: one
    record per (event, destination) fits ``topics.MAX_MESSAGE_BYTES`` as a ``task/1`` does."""
    return _pack(
        DESTINATION_TASK_SCHEMA,
        {
            "delivery_id": task.delivery_id,
            "chain_id": task.chain_id,
            "event_id": task.event.id,
            "owner": task.event.username,
            "destination": task.destination,
            "route": task.route,
            "trigger": task.trigger.value,
            "attempt": task.attempt,
            "not_before": _datetime_to_wire(task.not_before),
            "event": _event_to_fields(task.event),
        },
    )


def is_destination_task(value: bytes) -> bool:
    """Whether a record is a ``destination-task/1``, without unpacking it (as
    ``is_delivery_record``)."""
    return value[1 : 1 + len(_DESTINATION_TASK_PREFIX)] == _DESTINATION_TASK_PREFIX


def peek_destination_task(value: bytes) -> dict[str, Any]:
    """A destination task's fields as sent, unvalidated (``not_before`` in Unix milliseconds)."""
    return _unpack(DESTINATION_TASK_SCHEMA, value)


_DESTINATION_TASK_PREFIX: Final = _pack(DESTINATION_TASK_SCHEMA, {})[1:]


def decode_destination_task(value: bytes) -> DestinationTask:
    fields = _unpack(DESTINATION_TASK_SCHEMA, value)
    try:
        event = _event_from_fields(fields["event"])
        if (fields["event_id"], fields["owner"]) != (event.id, event.username):
            raise ValueError("event_id or owner differs from the event's")
        return DestinationTask(
            delivery_id=_text(fields["delivery_id"]),
            chain_id=_text(fields["chain_id"]),
            destination=_text(fields["destination"]),
            route=_text(fields["route"]),
            trigger=AttemptTrigger(fields["trigger"]),
            attempt=int(fields["attempt"]),
            not_before=_datetime_from_wire(fields["not_before"]),
            event=event,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"invalid {DESTINATION_TASK_SCHEMA} message: {exc}") from None


def encode_route_request(event: Event, chain_id: str) -> bytes:
    """A request to route ``event`` again over its webhook's current routes (a replay), as a
    new routing named ``chain_id``; published on ``Topics.replays`` keyed by event id."""
    return _pack(ROUTE_REQUEST_SCHEMA, {"chain_id": chain_id, "event": _event_to_fields(event)})


def is_route_request(value: bytes) -> bool:
    return value[1 : 1 + len(_ROUTE_REQUEST_PREFIX)] == _ROUTE_REQUEST_PREFIX


_ROUTE_REQUEST_PREFIX: Final = _pack(ROUTE_REQUEST_SCHEMA, {})[1:]


def decode_route_request(value: bytes) -> tuple[Event, str]:
    """The event and the routing's chain id."""
    fields = _unpack(ROUTE_REQUEST_SCHEMA, value)
    try:
        return _event_from_fields(fields["event"]), _text(fields["chain_id"])
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"invalid {ROUTE_REQUEST_SCHEMA} message: {exc}") from None


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {type(value).__name__}")
    return value

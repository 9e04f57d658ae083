"""An event's deliveries, kept in its head as ``deliveries``: one JSON text holding the latest
state of each delivery, ``{"<delivery id>": [route, destination, status, reason, at ms]}``, plus
the record's attempt chain as a sixth item when it is not the delivery's first
(``Delivery.first_chain``: the delivery was retried on its own; ``null`` otherwise when a
seventh follows), and its transformation's trace (``TransformTrace`` as a map) as a seventh
when it has one.

In the head rather than a collection of their own (``docs/decisions.md``, "Deliveries"): the
recorder moves an event's status from all its deliveries at once, so it reads and writes the
head anyway; kept there, a batch's deliveries of one event cost one read and one write of one
document, the event detail reads them with the head, and retention and owner deletion remove
them with it. Text, not sub-documents: FerretDB v1 decodes a string field far faster than a
map (``docs/data-model.md``), and lists leave the field out by projection.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from hookbay_common.clock import epoch_ms, from_epoch_ms
from hookbay_common.models import Delivery, DeliveryStatus, TransformTrace

DELIVERIES_FIELD = "deliveries"


def encode_deliveries(deliveries: Mapping[str, Delivery]) -> str:
    """The head's ``deliveries`` text for ``deliveries`` (by id), keys sorted."""
    return json.dumps(
        {i: _stored(d) for i, d in sorted(deliveries.items())},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _stored(d: Delivery) -> list[Any]:
    stored: list[Any] = [d.route, d.destination, d.status.value, d.reason, epoch_ms(d.at)]
    chain = d.chain if d.chain is not None and d.chain != d.first_chain else None
    if chain is not None or d.transform is not None:
        stored.append(chain)
    if d.transform is not None:
        stored.append(d.transform.model_dump(mode="json"))
    return stored


def decode_deliveries(head: Mapping[str, Any]) -> dict[str, Delivery]:
    """The deliveries a head holds, by id (none: an event of the ``forward_url`` path)."""
    text = head.get(DELIVERIES_FIELD)
    if not text:
        return {}
    found = {}
    for delivery_id, (route, destination, status, reason, at_ms, *rest) in json.loads(text).items():
        found[delivery_id] = Delivery(
            id=delivery_id, event_id=head["_id"], webhook_id=head.get("webhook_id", ""),
            username=head.get("username", ""), route=route, destination=destination,
            status=DeliveryStatus(status), reason=reason, at=from_epoch_ms(at_ms),
            chain=rest[0] if rest else None,
            transform=TransformTrace.model_validate(rest[1]) if len(rest) > 1 else None,
        )  # fmt: skip
    return found


def merged(stored: Mapping[str, Delivery], fresh: Iterable[Delivery]) -> dict[str, Delivery]:
    """``stored`` with each of ``fresh`` that supersedes the record of its delivery
    (``Delivery.supersedes``): the same whatever order the records come in, and however often.
    A delivery keeps the route and destination names it was first recorded with (the names
    when it was routed): a later record that knows only the destination's key (its lane's,
    once the destination was deleted) moves the status, not the names."""
    result = dict(stored)
    for delivery in fresh:
        known = result.get(delivery.id)
        if known is None or delivery.supersedes(known):
            if known is not None and (known.route, known.destination) != (
                delivery.route, delivery.destination,
            ):  # fmt: skip
                delivery = delivery.model_copy(
                    update={"route": known.route, "destination": known.destination}
                )
            result[delivery.id] = delivery
    return result


def _same(a: Mapping[str, Delivery], b: Mapping[str, Delivery]) -> bool:
    """Whether two sets of deliveries store the same (the event's own ids aside)."""
    return encode_deliveries(a) == encode_deliveries(b)

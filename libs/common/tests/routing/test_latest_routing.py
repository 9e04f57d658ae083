"""An event's status comes from the deliveries of its latest routing: its first, or its latest
replay's (delivery ids name their routing)."""

from __future__ import annotations

from hookbay_common.ids import IdPrefix, new_id
from hookbay_common.models import DeliveryStatus, EventStatus, event_status_of, latest_routing
from hookbay_common.routing.tasks import delivery_id
from tests.support.factories import create_delivery, create_event


def test_a_replay_s_deliveries_alone_give_the_status() -> None:
    event = create_event(routed=True)
    first = [
        create_delivery(
            event, id=delivery_id(event.id, "rte_a", event.id), status=DeliveryStatus.FAILED
        ),
        create_delivery(
            event, id=delivery_id(event.id, "rte_b", event.id), status=DeliveryStatus.SUCCESS
        ),
    ]
    assert event_status_of(first) is EventStatus.FAILED
    chain = new_id(IdPrefix.CHAIN)  # made after the event: sorts after it
    replay = [
        create_delivery(
            event, id=delivery_id(chain, "rte_a", event.id), status=DeliveryStatus.SUCCESS
        ),
    ]
    assert latest_routing([*replay, *first]) == replay
    assert event_status_of([*first, *replay]) is EventStatus.SUCCESS
    later = new_id(IdPrefix.CHAIN)
    pending = [
        create_delivery(event, id=delivery_id(later, "rte_a", event.id), status=DeliveryStatus.HELD)
    ]
    assert event_status_of([*first, *replay, *pending]) is EventStatus.PENDING


def test_no_deliveries() -> None:
    assert latest_routing([]) == []

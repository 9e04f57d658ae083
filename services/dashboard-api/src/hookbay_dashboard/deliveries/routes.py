"""``POST /deliveries/{delivery_id}/retry``: one delivery of a routed event, again."""

from __future__ import annotations

from fastapi import APIRouter, status

from hookbay_dashboard.deliveries.schemas import DeliveryRetryAccepted
from hookbay_dashboard.deps import CurrentUser, DeliveriesDep

router = APIRouter(tags=["deliveries"])


@router.post(
    "/deliveries/{delivery_id}/retry",
    response_model=DeliveryRetryAccepted,
    status_code=status.HTTP_202_ACCEPTED,
)
async def retry_delivery(
    delivery_id: str, principal: CurrentUser, deliveries: DeliveriesDep
) -> DeliveryRetryAccepted:
    """Deliver the event again over this delivery's route alone, to its destination as it is
    now, as a new attempt chain of the same delivery (trigger ``replay``); the event's other
    deliveries are untouched and its status follows. Answered once Kafka holds the retry. 409
    unless the delivery failed or succeeded (a filtered, held or waiting one says why), or
    when its destination was deleted; 503 while Kafka is unreachable."""
    return await deliveries.retry(delivery_id, username=principal.username)

"""``POST /deliveries/{delivery_id}/retry``: one delivery of a routed event, again;
``POST /destinations/{dest}/retry-failed``: a destination's failed deliveries, again."""

from __future__ import annotations

from fastapi import APIRouter, status

from hookbay_dashboard.deliveries.schemas import (
    DeliveryRetryAccepted,
    FailedRetried,
    FailedRetryRequest,
)
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


@router.post(
    "/destinations/{dest}/retry-failed",
    response_model=FailedRetried,
    status_code=status.HTTP_202_ACCEPTED,
)
async def retry_failed_deliveries(
    dest: str, principal: CurrentUser, deliveries: DeliveriesDep,
    body: FailedRetryRequest | None = None,
) -> FailedRetried:  # fmt: skip
    """Retry every delivery to this destination still failed in its event's latest routing,
    over the failed events of your webhooks whose routes name it now, oldest first: each as
    ``POST /deliveries/{id}/retry`` does (a new attempt chain to the destination as it is now;
    held while it is paused). At most ``limit`` deliveries per call; while ``next`` is not null,
    send it as ``after`` to go on over the same events (those failed before the first call).
    Answered once Kafka holds them; 404 for a destination you do not have; 422 for an ``after``
    this endpoint did not give; 503 while Kafka is unreachable (those published before stay
    queued)."""
    body = body or FailedRetryRequest()
    return await deliveries.retry_failed(
        principal.username, dest, limit=body.limit, after=body.after
    )

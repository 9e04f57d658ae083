"""Bodies of the delivery endpoints."""

from __future__ import annotations

from pydantic import BaseModel, Field

from hookbay_common.models import DeliveryStatus


class DeliveryRetryAccepted(BaseModel):
    """A delivery's retry durably queued on Kafka: its attempts carry ``chain_id`` and trigger
    ``replay`` and show up under the event as the destination's lane makes them."""

    delivery_id: str
    event_id: str
    chain_id: str
    route: str
    destination: str
    status: DeliveryStatus = Field(
        description="The delivery's status now: scheduled, or held while its destination is "
        "paused or disabled (delivered when it is resumed)."
    )

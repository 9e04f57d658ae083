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


class FailedRetryRequest(BaseModel):
    limit: int = Field(
        default=1000, ge=1, le=1000, description="Deliveries this call retries at most."
    )
    after: str | None = Field(
        default=None, max_length=2048,
        description="The previous answer's next: go on where it stopped, over the same events.",
    )  # fmt: skip


class FailedRetried(BaseModel):
    """A destination's failed deliveries durably queued again on Kafka."""

    destination: str
    retried: int = Field(description="Deliveries queued again (each a new attempt chain).")
    next: str | None = Field(
        description="Where this call stopped (the limit, or the number of failed events one "
        "call reads, was reached): send it as after to go on; null when every one was seen."
    )

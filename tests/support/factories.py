"""Plain ``create_*`` factories for records (``hookbay_dev.factories``, shared with the scripts)."""

from hookbay_dev.factories import (
    TEST_SECRET_KEY,
    create_attempt,
    create_delivery,
    create_destination,
    create_destination_task,
    create_event,
    create_route,
    create_user,
    create_webhook,
    unique_name,
)

__all__ = [
    "TEST_SECRET_KEY",
    "create_attempt",
    "create_delivery",
    "create_destination",
    "create_destination_task",
    "create_event",
    "create_route",
    "create_user",
    "create_webhook",
    "unique_name",
]

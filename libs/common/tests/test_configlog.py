"""Change-log records of destinations, transformations and webhooks with routes: sealed, and
readable back."""

from __future__ import annotations

import json

from pydantic import SecretStr

from hookbay_common.clock import utcnow
from hookbay_common.configlog import (
    ConfigChange,
    Entity,
    decode_change,
    destination_key,
    encode_change,
    kafka_key,
    transformation_key,
)
from hookbay_common.models import (
    DestinationState,
    RateLimit,
    RatePeriod,
    StateReason,
    Transformation,
)
from hookbay_common.secrets_box import SecretBox
from tests.support.factories import (
    TEST_SECRET_KEY,
    create_destination,
    create_route,
    create_webhook,
)

BOX = SecretBox(TEST_SECRET_KEY)


class TestDestinationRecords:
    def test_round_trip_with_header_values_sealed(self) -> None:
        destination = create_destination(
            headers={"authorization": SecretStr("Bearer very-secret")},
            retry_schedule=("0", "10s"), rate_limit=RateLimit(count=5, period=RatePeriod.SECOND),
            max_concurrency=1, state=DestinationState.PAUSED, state_reason=StateReason.MANUAL,
        )  # fmt: skip
        value = encode_change(ConfigChange.of_destination(destination), BOX)
        assert b"very-secret" not in value
        decoded = decode_change(value, BOX)
        assert decoded.key == (Entity.DESTINATION.value, destination.username, destination.name)
        assert decoded.destination == destination
        assert decoded.at == destination.updated_at
        assert not decoded.deleted

    def test_a_deletion(self) -> None:
        key = destination_key("alice", "billing")
        assert kafka_key(key) == b"destination:alice/billing"
        decoded = decode_change(encode_change(ConfigChange.deletion(key), BOX), BOX)
        assert (decoded.key, decoded.deleted, decoded.destination) == (key, True, None)


class TestTransformationRecords:
    def test_round_trip_with_env_values_sealed(self) -> None:
        now = utcnow()
        transformation = Transformation(
            id="trf_01", username="alice", name="shape", code="addHandler('transform', (r) => r)",
            env={"API_KEY": SecretStr("very-secret-env")}, version=3, created_at=now,
            updated_at=now,
        )  # fmt: skip
        value = encode_change(ConfigChange.of_transformation(transformation), BOX)
        assert b"very-secret-env" not in value
        decoded = decode_change(value, BOX)
        assert decoded.key == (Entity.TRANSFORMATION.value, "alice", "shape")
        assert decoded.transformation == transformation
        assert not decoded.deleted

    def test_a_deletion(self) -> None:
        key = transformation_key("alice", "shape")
        assert kafka_key(key) == b"transformation:alice/shape"
        decoded = decode_change(encode_change(ConfigChange.deletion(key), BOX), BOX)
        assert (decoded.key, decoded.deleted, decoded.transformation) == (key, True, None)


class TestWebhookRecords:
    def test_routes_travel_in_order_with_their_filters(self) -> None:
        routes = (
            create_route(name="a", filter={"body": {"type": {"$in": ["paid", "refunded"]}}}),
            create_route(name="b", enabled=False),
        )
        webhook = create_webhook(routes=routes)
        decoded = decode_change(encode_change(ConfigChange.of_webhook(webhook), BOX), BOX)
        assert decoded.webhook == webhook

    def test_a_webhook_without_routes_has_no_routes_field(self) -> None:
        """Readable by a replica of a version before routes (its model refuses the field)."""
        value = encode_change(ConfigChange.of_webhook(create_webhook()), BOX)
        assert "routes" not in json.loads(value)["record"]

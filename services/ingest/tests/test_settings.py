"""Ingest's settings: the header limits and the promise that every request under the limits
fits one Kafka record."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from hookbay_common.topics import MAX_MESSAGE_BYTES
from hookbay_common.wire import max_event_bytes
from hookbay_ingest.settings import IngestSettings
from tests.support.factories import TEST_SECRET_KEY


class TestIngestSettings:
    def test_header_limit_defaults(self) -> None:
        settings = IngestSettings(secret_key=SecretStr(TEST_SECRET_KEY))
        assert (settings.max_header_bytes, settings.max_header_count) == (65_536, 100)

    def test_the_largest_body_with_default_headers_fits_kafka(self) -> None:
        settings = IngestSettings(secret_key=SecretStr(TEST_SECRET_KEY), max_body_bytes=6_000_000)
        assert (
            max_event_bytes(
                body_bytes=settings.max_body_bytes,
                header_bytes=settings.max_header_bytes,
                header_count=settings.max_header_count,
            )
            <= MAX_MESSAGE_BYTES
        )

    def test_limits_that_cannot_fit_kafka_are_refused(self) -> None:
        with pytest.raises(ValidationError, match="more than the 6291456 bytes a Kafka record"):
            IngestSettings(
                secret_key=SecretStr(TEST_SECRET_KEY),
                max_body_bytes=6_000_000,
                max_header_bytes=262_144,
            )

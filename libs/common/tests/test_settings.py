from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from hookbay_common.settings import DEFAULT_RETRY_SCHEDULE, Settings, parse_duration
from tests.support.factories import TEST_SECRET_KEY


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for key in list(os.environ):
        if key.startswith("HOOKBAY_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOOKBAY_SECRET_KEY", TEST_SECRET_KEY)
    return monkeypatch


class TestSettings:
    def test_defaults_match_the_design(self, clean_env: pytest.MonkeyPatch) -> None:
        settings = Settings()  # type: ignore[call-arg]
        assert settings.kafka_bootstrap == "127.0.0.1:9092"
        assert settings.mongo_url == "mongodb://127.0.0.1:27017/hookbay"
        assert settings.redis_url is None
        assert settings.max_body_bytes == 4_500_000
        assert settings.forward_timeout == 10.0
        assert settings.retry_schedule == DEFAULT_RETRY_SCHEDULE == (0, 10, 60, 600, 3600, 21600)
        assert settings.allow_private_destinations is False
        assert settings.trusted_proxies == ()

    def test_reads_prefixed_environment(self, clean_env: pytest.MonkeyPatch) -> None:
        clean_env.setenv("HOOKBAY_RETRY_SCHEDULE", "0, 1s,250ms,2m,1h")
        clean_env.setenv("HOOKBAY_TRUSTED_PROXIES", "10.0.0.0/8, 192.168.1.7")
        clean_env.setenv("HOOKBAY_ALLOW_PRIVATE_DESTINATIONS", "true")
        clean_env.setenv("HOOKBAY_MAX_BODY_BYTES", "1000")
        settings = Settings()  # type: ignore[call-arg]
        assert settings.retry_schedule == (0.0, 1.0, 0.25, 120.0, 3600.0)
        assert settings.trusted_proxies == (
            ipaddress.ip_network("10.0.0.0/8"),
            ipaddress.ip_network("192.168.1.7/32"),
        )
        assert settings.allow_private_destinations is True
        assert settings.max_body_bytes == 1000

    def test_a_schedule_without_retries_still_has_the_delay_tiers(
        self, clean_env: pytest.MonkeyPatch
    ) -> None:
        clean_env.setenv("HOOKBAY_RETRY_SCHEDULE", "0,0,250ms")
        clean_env.setenv("HOOKBAY_KAFKA_NAMESPACE", "ns")
        settings = Settings()  # type: ignore[call-arg]
        assert settings.delay_tiers == (0.25, 10.0, 60.0, 600.0, 3600.0, 21600.0)
        tiers = [s.name for s in settings.topic_specs() if s.name.startswith("ns.retry.")]
        assert tiers == ["ns.retry.0ms", "ns.retry.10m", "ns.retry.10s", "ns.retry.1h",
                         "ns.retry.1m", "ns.retry.250ms", "ns.retry.6h"]  # fmt: skip

    @pytest.mark.parametrize(
        ("variable", "value", "fragment"),
        [
            ("HOOKBAY_RETRY_SCHEDULE", "0,soon", "not a duration"),
            ("HOOKBAY_RETRY_SCHEDULE", "", "at least one entry"),
            ("HOOKBAY_TRUSTED_PROXIES", "10.0.0.0/33", "does not appear to be an IPv4 or IPv6"),
            ("HOOKBAY_MAX_BODY_BYTES", "0", "greater than or equal to 1"),
            ("HOOKBAY_SECRET_KEY", "changethis", "placeholder"),
            ("HOOKBAY_SECRET_KEY", "short", "at least 32 characters"),
            ("HOOKBAY_LOG_LEVEL", "LOUD", "one of DEBUG"),
            ("HOOKBAY_MONGO_URL", "postgres://x", "mongodb://"),
        ],
    )
    def test_refuses_invalid_values(
        self, clean_env: pytest.MonkeyPatch, variable: str, value: str, fragment: str
    ) -> None:
        clean_env.setenv(variable, value)
        with pytest.raises(ValidationError, match=fragment):
            Settings()  # type: ignore[call-arg]

    def test_secret_key_is_required(self, clean_env: pytest.MonkeyPatch) -> None:
        clean_env.delenv("HOOKBAY_SECRET_KEY")
        with pytest.raises(ValidationError, match="secret_key"):
            Settings()  # type: ignore[call-arg]

    def test_secret_key_is_not_shown(self, clean_env: pytest.MonkeyPatch) -> None:
        settings = Settings()  # type: ignore[call-arg]
        assert TEST_SECRET_KEY not in repr(settings)


class TestParseDuration:
    @pytest.mark.parametrize(
        ("text", "seconds"),
        [("0", 0.0), ("1.5", 1.5), ("500ms", 0.5), ("10s", 10.0), ("1m", 60.0), ("6h", 21600.0)],
    )
    def test_units(self, text: str, seconds: float) -> None:
        assert parse_duration(text) == seconds

    def test_rejects_negative(self) -> None:
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration("-1s")

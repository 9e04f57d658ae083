from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from hookbay_forwarder.delivery.retry import RetryPolicy, is_retryable, parse_retry_after

DEFAULT = RetryPolicy((0.0, 10.0, 60.0, 600.0, 3600.0, 21600.0), jitter=0.1)


class TestIsRetryable:
    @pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 599])
    def test_retryable_statuses(self, status: int) -> None:
        assert is_retryable(status, None, blocked=False)

    @pytest.mark.parametrize("status", [301, 400, 401, 403, 404, 410, 413, 422])
    def test_other_statuses_fail_at_once(self, status: int) -> None:
        assert not is_retryable(status, None, blocked=False)

    def test_network_error_retries_but_a_refused_destination_does_not(self) -> None:
        assert is_retryable(None, "connection failed: refused", blocked=False)
        assert not is_retryable(None, "destination not allowed", blocked=True)


class TestNextWait:
    def test_follows_the_schedule_within_the_jitter(self) -> None:
        rng = random.Random(7)
        for made, base in enumerate(DEFAULT.schedule[1:], start=1):
            wait = DEFAULT.next_wait(made, rng=rng)
            assert wait is not None
            assert base <= wait.delay <= base * 1.1
            assert wait.tier == base

    def test_chain_ends_after_the_last_entry(self) -> None:
        assert DEFAULT.next_wait(6) is None
        assert RetryPolicy((0.0,)).next_wait(1) is None

    def test_retry_after_longer_than_the_schedule_moves_to_a_covering_tier(self) -> None:
        wait = DEFAULT.next_wait(1, retry_after=45.0, rng=random.Random(1))
        assert wait is not None
        assert wait.delay == 45.0
        assert wait.tier == 60.0

    def test_retry_after_is_capped_by_the_longest_tier(self) -> None:
        wait = DEFAULT.next_wait(1, retry_after=10 * 86400.0)
        assert wait is not None
        assert wait.tier == 21600.0
        assert wait.delay == pytest.approx(21600.0 * 1.1)

    def test_a_shorter_retry_after_does_not_shorten_the_schedule(self) -> None:
        wait = DEFAULT.next_wait(2, retry_after=1.0, rng=random.Random(3))
        assert wait is not None
        assert wait.delay >= 60.0


class TestParseRetryAfter:
    def test_seconds(self) -> None:
        assert parse_retry_after(" 120 ") == 120.0

    def test_http_date(self) -> None:
        now = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
        later = (now + timedelta(seconds=90)).strftime("%a, %d %b %Y %H:%M:%S GMT")
        assert parse_retry_after(later, now=now) == 90.0

    @pytest.mark.parametrize("value", [None, "", "soon", "-5", "1.5"])
    def test_unusable_values_are_ignored(self, value: str | None) -> None:
        assert parse_retry_after(value) is None

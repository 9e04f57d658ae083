from __future__ import annotations

import pytest

from hookbay_forwarder.gateway import Rate, RatePeriod, TokenBucket


def starts_in(bucket: TokenBucket, seconds: float) -> int:
    """Take tokens as soon as each is due, for ``seconds``; how many were taken."""
    now, taken = 0.0, 0
    while True:
        wait = bucket.take(now)
        if wait == 0:
            taken += 1
            continue
        now += wait
        if now >= seconds:
            return taken


class TestTokenBucket:
    @pytest.mark.parametrize(
        ("rate", "minute"),
        [
            (Rate(5, RatePeriod.SECOND), 300),
            (Rate(1000, RatePeriod.SECOND), 60_000),
            (Rate(120, RatePeriod.MINUTE), 120),
            (Rate(7, RatePeriod.MINUTE), 7),
            (Rate(3600, RatePeriod.HOUR), 60),
        ],
    )
    def test_a_minute_holds_the_rate_within_ten_percent(self, rate: Rate, minute: int) -> None:
        taken = starts_in(TokenBucket(rate, 0.0), 60)
        assert minute * 0.9 <= taken <= minute * 1.1

    def test_a_full_bucket_lets_one_seconds_worth_at_once(self) -> None:
        bucket = TokenBucket(Rate(300, RatePeriod.MINUTE), 0.0)
        assert [bucket.take(0.0) for _ in range(5)] == [0.0] * 5
        assert bucket.take(0.0) == pytest.approx(0.2)

    def test_the_wait_is_computed_never_slept(self) -> None:
        bucket = TokenBucket(Rate(1, RatePeriod.MINUTE), 0.0)
        assert bucket.take(0.0) == 0.0
        assert bucket.take(0.0) == pytest.approx(60.0)
        assert bucket.take(45.0) == pytest.approx(15.0)  # a refused take consumes nothing
        assert bucket.take(60.0) == 0.0

    def test_a_new_rate_keeps_saved_tokens_up_to_its_burst(self) -> None:
        bucket = TokenBucket(Rate(100, RatePeriod.SECOND), 0.0)
        bucket.configure(Rate(2, RatePeriod.SECOND), 0.0)
        assert [bucket.take(0.0) for _ in range(2)] == [0.0, 0.0]
        assert bucket.take(0.0) == pytest.approx(0.5)

    def test_full_after_idling(self) -> None:
        bucket = TokenBucket(Rate(1, RatePeriod.SECOND), 0.0)
        bucket.take(0.0)
        assert not bucket.full(0.5)
        assert bucket.full(1.0)

    def test_a_rate_allows_at_least_one(self) -> None:
        with pytest.raises(ValueError, match="at least one"):
            Rate(0, RatePeriod.SECOND)

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from ulid import ULID

from hookbay_common.clock import epoch_ms, from_epoch_ms, isoformat, utcnow
from hookbay_common.errors import InvalidRequest
from hookbay_common.ids import IdPrefix, has_prefix, new_id
from hookbay_common.names import (
    check_storable,
    check_username,
    check_webhook_name,
    is_valid_username,
    is_valid_webhook_name,
)


class TestIds:
    @pytest.mark.parametrize("prefix", list(IdPrefix))
    def test_prefix_and_url_safe_suffix(self, prefix: IdPrefix) -> None:
        value = new_id(prefix)
        assert value.startswith(f"{prefix.value}_")
        assert has_prefix(value, prefix)
        assert value == value.lower()
        assert value.replace("_", "").isalnum()

    def test_unique(self) -> None:
        assert len({new_id(IdPrefix.EVENT) for _ in range(10_000)}) == 10_000

    def test_later_millisecond_sorts_later(self) -> None:
        first = new_id(IdPrefix.EVENT)
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:  # wait for the clock to move on by 2 ms
            second = new_id(IdPrefix.EVENT)
            if second[4:14] > first[4:14]:
                break
        assert second > first

    def test_the_suffix_is_a_ulid_of_the_time_it_was_made(self) -> None:
        """python-ulid, the reference, reads the suffix back: its millisecond is the one the id
        was made in, and its randomness differs from id to id."""
        randoms = set()
        for _ in range(2000):
            before = time.time_ns() // 1_000_000
            suffix = new_id(IdPrefix.EVENT)[4:]
            after = time.time_ns() // 1_000_000
            parsed = ULID.from_str(suffix.upper())
            assert before <= parsed.milliseconds <= after
            assert str(parsed).lower() == suffix
            randoms.add(parsed.bytes[6:])
        assert len(randoms) == 2000

    def test_ids_sort_in_the_order_they_were_made_even_within_a_millisecond(self) -> None:
        """As python-ulid's ``ULID()``: an attempt made right after another one sorts after it
        (the latest attempt decides an event's status)."""
        made = [new_id(IdPrefix.ATTEMPT) for _ in range(5000)]
        assert made == sorted(made)
        assert len(set(made)) == len(made)
        assert len({m[4:14] for m in made}) < len(made)  # many shared a millisecond

    def test_has_prefix_rejects_others(self) -> None:
        assert not has_prefix(new_id(IdPrefix.REQUEST), IdPrefix.EVENT)
        assert not has_prefix("evt_short", IdPrefix.EVENT)


class TestNames:
    @pytest.mark.parametrize("name", ["a", "alice", "a-b", "a1", "0", "a" * 39, "x-y-z9"])
    def test_valid_usernames(self, name: str) -> None:
        assert is_valid_username(name)
        assert check_username(name) == name

    @pytest.mark.parametrize("name", ["", "-a", "a-", "Alice", "a_b", "a.b", "a" * 40, "ä"])
    def test_invalid_usernames(self, name: str) -> None:
        assert not is_valid_username(name)
        with pytest.raises(InvalidRequest, match="invalid username"):
            check_username(name)

    @pytest.mark.parametrize("name", ["orders", "stripe-live", "a1-b2-c3", "x" * 64])
    def test_valid_webhook_names(self, name: str) -> None:
        assert is_valid_webhook_name(name)

    @pytest.mark.parametrize("name", ["", "a--b", "-a", "a-", "Orders", "a_b", "x" * 65])
    def test_invalid_webhook_names(self, name: str) -> None:
        assert not is_valid_webhook_name(name)
        with pytest.raises(InvalidRequest, match="invalid webhook name") as caught:
            check_webhook_name(name)
        assert caught.value.body()["webhookName"] == name


class TestStorable:
    @pytest.mark.parametrize("text", ["", "plain", "caf\u00e9", "\U0001f600\U00096809", "\t\n"])
    def test_storable(self, text: str) -> None:
        assert check_storable(text, "x") == text

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ("a\x00b", "a NUL character"),
            ("\ud800", "an unpaired surrogate"),
            ("\udc09x", "an unpaired surrogate"),
        ],
    )
    def test_refused_with_where_it_came_from(self, text: str, problem: str) -> None:
        with pytest.raises(InvalidRequest) as caught:
            check_storable(text, "query parameter cursor")
        assert caught.value.body() == {
            "error": "Invalid request",
            "message": f"query parameter cursor holds {problem}, which hookbay does not accept "
            "in any text",
            "parameter": "query parameter cursor",
        }


class TestClock:
    def test_utcnow_is_aware_with_millisecond_precision(self) -> None:
        now = utcnow()
        assert now.tzinfo is UTC
        assert now.microsecond % 1000 == 0

    def test_isoformat(self) -> None:
        moment = datetime(2026, 11, 21, 10, 4, 5, 123456, tzinfo=UTC)
        assert isoformat(moment) == "2026-11-21T10:04:05.123Z"
        shifted = moment.astimezone(timezone(timedelta(hours=2)))
        assert isoformat(shifted) == "2026-11-21T10:04:05.123Z"

    def test_epoch_milliseconds_round_trip_exactly(self) -> None:
        moment = datetime(2026, 11, 21, 10, 4, 5, 123000, tzinfo=UTC)
        assert epoch_ms(moment) == 1_795_255_445_123
        assert from_epoch_ms(epoch_ms(moment)) == moment
        assert from_epoch_ms(-1) == datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
        later = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)  # beyond a float's ms
        assert from_epoch_ms(epoch_ms(later)) == later

from __future__ import annotations

import pytest

from hookbay_forwarder.delivery.deadletter import DeadLetterLimit, DeadLetterLimitExceeded


def limit() -> DeadLetterLimit:
    return DeadLetterLimit(window=10, ratio=0.5, min_hosts=3, max_invalid=3)


class TestDeadLetterLimit:
    def test_many_hosts_failing_trips(self) -> None:
        dlq = limit()
        for _ in range(5):
            dlq.chain_ended(dead_letter_host=None)
        for i in range(4):
            dlq.chain_ended(dead_letter_host=f"h{i % 3}.example")
        with pytest.raises(DeadLetterLimitExceeded, match="across 3 destination hosts"):
            dlq.chain_ended(dead_letter_host="h0.example")

    def test_one_bad_destination_never_trips(self) -> None:
        dlq = limit()
        for _ in range(100):
            dlq.chain_ended(dead_letter_host="broken.example")

    def test_successes_keep_the_share_low(self) -> None:
        dlq = limit()
        for i in range(100):
            dlq.chain_ended(dead_letter_host=f"h{i}.example" if i % 3 == 0 else None)

    def test_old_dead_letters_leave_the_window(self) -> None:
        dlq = limit()
        for i in range(4):
            dlq.chain_ended(dead_letter_host=f"h{i}.example")
        for _ in range(10):
            dlq.chain_ended(dead_letter_host=None)
        for i in range(4):
            dlq.chain_ended(dead_letter_host=f"h{i}.example")  # 4 of 10: under the ratio

    def test_invalid_messages_in_a_row_trip(self) -> None:
        dlq = limit()
        dlq.invalid()
        dlq.invalid()
        dlq.chain_ended(dead_letter_host=None)  # a good message resets the run
        dlq.invalid()
        dlq.invalid()
        with pytest.raises(DeadLetterLimitExceeded, match="3 messages in a row"):
            dlq.invalid()

from __future__ import annotations

from hookbay_forwarder.consumer import _Partition


class TestPartitionOffsets:
    def test_commits_only_below_the_first_unfinished_record(self) -> None:
        part = _Partition()
        for offset in (10, 11, 12, 13):
            part.add(offset)
        assert part.committable() == 10
        part.finish(12)
        part.finish(11)
        assert part.committable() == 10  # 10 still running: nothing past it is safe
        part.finish(10)
        assert part.committable() == 13
        part.finish(13)
        assert part.committable() == 14

    def test_nothing_read_nothing_to_commit(self) -> None:
        assert _Partition().committable() is None

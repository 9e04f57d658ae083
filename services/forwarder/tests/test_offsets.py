"""In-order offset tracking shared by the delivery consume loop and the lanes."""

from __future__ import annotations

from hookbay_forwarder.offsets import PartitionOffsets


class TestPartitionOffsets:
    def test_commits_only_below_the_first_unfinished_record(self) -> None:
        part = PartitionOffsets()
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
        assert PartitionOffsets().committable() is None

    def test_a_record_of_several_pieces_is_done_when_all_are(self) -> None:
        part = PartitionOffsets()
        part.add(5, units=3)
        part.add(6)
        part.finish(5)
        part.finish(6)
        part.finish(5)
        assert part.committable() == 5
        part.finish(5)
        assert part.committable() == 7

    def test_a_record_of_no_work_is_done_at_once(self) -> None:
        part = PartitionOffsets()
        part.add(1, units=0)
        assert part.committable() == 2
        part.add(2)
        part.add(3, units=0)
        assert part.committable() == 2
        part.finish(2)
        assert part.committable() == 4

    def test_rewind_forgets_what_will_be_read_again(self) -> None:
        part = PartitionOffsets()
        for offset in (1, 2, 3, 4):
            part.add(offset)
        part.finish(1)
        part.rewind(3)
        assert part.committable() == 2
        part.finish(2)
        assert part.committable() == 3
        part.add(3)
        assert part.committable() == 3

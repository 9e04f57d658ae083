"""Which offset of a partition may be committed: the in-order tracking every at-least-once
consumer of the forwarder shares (the delivery consume loop, the delivery lanes).

A record is *added* when it is read, with the number of pieces of work it carries (a record
that fans out into several deliveries carries several; one that carries none is handled at
once), and *finished* once per piece. The committable offset is the first record not fully
handled, else the next to read: committing it never skips work, and a crash redoes at most
what was read after it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class PartitionOffsets:
    """Offsets read from one partition, in order, and how much of each is still unfinished."""

    offsets: deque[int] = field(default_factory=deque)
    open: dict[int, int] = field(default_factory=dict)
    """Unfinished pieces per offset still in ``offsets``; an offset absent here is done."""
    committed: int | None = None
    next_offset: int | None = None

    def add(self, offset: int, units: int = 1) -> None:
        """Record ``offset`` as read, carrying ``units`` pieces of work (0: handled already)."""
        self.next_offset = offset + 1
        if units <= 0:
            if not self.offsets:
                return
            self.offsets.append(offset)
            self._advance()
            return
        self.offsets.append(offset)
        self.open[offset] = units

    def finish(self, offset: int) -> None:
        """One piece of ``offset``'s work is handled (at most ``units`` calls per offset)."""
        left = self.open.get(offset, 0) - 1
        if left > 0:
            self.open[offset] = left
            return
        self.open.pop(offset, None)
        self._advance()

    def _advance(self) -> None:
        while self.offsets and self.offsets[0] not in self.open:
            self.offsets.popleft()

    def rewind(self, offset: int) -> None:
        """Forget every offset from ``offset`` on: they will be read (added) again."""
        while self.offsets and self.offsets[-1] >= offset:
            self.open.pop(self.offsets.pop(), None)
        if self.next_offset is not None and self.next_offset > offset:
            self.next_offset = offset

    def committable(self) -> int | None:
        """The offset to commit: the first record not handled yet, else the next to read."""
        return self.offsets[0] if self.offsets else self.next_offset

    @property
    def unfinished(self) -> int:
        """Records read and not fully handled."""
        return len(self.open)

"""The limits one transformation call runs under, and the fixed bounds around them."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024

CODE_MAX_BYTES = 64 * 1024
"""The largest transformation source accepted (UTF-8 bytes), at save time and at run time."""

REQUEST_MAX_BYTES = 4_500_000 + 64 * 1024
"""The largest request handed to a transformation: a 4.5 MB body plus 64 KiB of headers,
query and path, as its JSON text."""

REQUEST_MEMORY_FACTOR = 8
"""The engine's memory limit is the call's ``memory_mb`` plus this many times the request's JSON
size: room for the request as text, parsed, and the answer serialised (measured: a 4.5 MB
JSON body parsed and serialised again peaks at about 7.9 times its size in QuickJS-ng)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one call may use. ``cpu_s`` is CPU time in the engine (parsing the code, running
    its top level, the handler, serialising the answer); ``memory_mb`` the engine heap on top of
    the request's own room (``REQUEST_MEMORY_FACTOR``); ``stack_kb`` the engine's stack;
    ``output_bytes`` the answer's JSON size; ``log_lines`` / ``log_bytes`` what ``console``
    keeps (what comes after is counted, not kept). ``margin_s`` is the host's slack over
    ``cpu_s``: a call not answered within ``cpu_s + margin_s`` of wall time has its worker
    killed and ends as ``timeout``."""

    cpu_s: float = 1.0
    memory_mb: int = 32
    stack_kb: int = 1024
    output_bytes: int = 5 * MIB
    log_lines: int = 100
    log_bytes: int = 8 * 1024
    margin_s: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.cpu_s <= 30:
            raise ValueError("cpu_s must be within (0, 30]")
        if not 1 <= self.memory_mb <= 1024:
            raise ValueError("memory_mb must be within [1, 1024]")
        if not 64 <= self.stack_kb <= 4096:
            raise ValueError("stack_kb must be within [64, 4096]")
        if self.output_bytes < 1 or self.log_lines < 0 or self.log_bytes < 0:
            raise ValueError("output_bytes must be positive, the log bounds not negative")
        if self.margin_s <= 0:
            raise ValueError("margin_s must be positive")

    def engine_memory_bytes(self, request_bytes: int) -> int:
        """The engine heap limit for a call whose request JSON is ``request_bytes`` long."""
        return self.memory_mb * MIB + REQUEST_MEMORY_FACTOR * request_bytes

    @property
    def deadline_s(self) -> float:
        """Wall time the host waits for a call's answer before killing its worker."""
        return self.cpu_s + self.margin_s

    def to_wire(self) -> dict[str, float | int]:
        return {
            "cpu_s": self.cpu_s,
            "memory_mb": self.memory_mb,
            "stack_kb": self.stack_kb,
            "output_bytes": self.output_bytes,
            "log_lines": self.log_lines,
            "log_bytes": self.log_bytes,
            "margin_s": self.margin_s,
        }

    @classmethod
    def from_wire(cls, data: dict[str, float | int]) -> Limits:
        return cls(
            cpu_s=float(data["cpu_s"]),
            memory_mb=int(data["memory_mb"]),
            stack_kb=int(data["stack_kb"]),
            output_bytes=int(data["output_bytes"]),
            log_lines=int(data["log_lines"]),
            log_bytes=int(data["log_bytes"]),
            margin_s=float(data["margin_s"]),
        )

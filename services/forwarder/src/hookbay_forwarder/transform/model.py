"""What a transformation takes and gives: the request, the result, the error."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ErrorKind = Literal[
    "syntax", "runtime", "timeout", "memory", "invalid_output", "crashed", "too_large"
]
"""Why a call failed. ``syntax``: the code does not parse; ``runtime``: it threw (at its top
level or in the handler), or registered no handler; ``timeout``: the CPU limit, or the host's
deadline; ``memory``: the engine's heap limit (or the worker's address space); ``invalid_output``:
the handler returned something that is not a request (or one over the output limit);
``crashed``: the worker died without an answer, twice; ``too_large``: the code or the request is
over its size limit (nothing ran)."""


@dataclass(frozen=True, slots=True)
class TransformRequest:
    """The request a transformation sees and returns, as Hookdeck's ``request``: ``headers``
    (lower-case names to string values), ``body`` (the parsed JSON value when the event's body
    is JSON, the raw text otherwise; a ``str`` either way means a JS string), ``query`` (the raw
    query string, without ``?``) and ``path``."""

    headers: Mapping[str, str]
    body: Any
    query: str = ""
    path: str = "/"

    def to_json(self) -> str:
        """The request as the JSON text a worker hands to the engine."""
        data = {"headers": dict(self.headers), "body": self.body, "query": self.query}
        data["path"] = self.path
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True, slots=True)
class TransformError:
    """A failed call or a refused code: its ``kind``, a ``message`` in the owner's words, and
    where in the owner's code it happened when the engine says (1-based ``line`` and
    ``column``)."""

    kind: ErrorKind
    message: str
    line: int | None = None
    column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "line": self.line,
            "column": self.column,
        }


@dataclass(frozen=True, slots=True)
class TransformResult:
    """One call's outcome. ``ok`` with the returned ``request``, or not with an ``error``;
    ``logs`` is what ``console`` printed (bounded, in order, a final line saying how much was
    left out), on success and failure alike; ``cpu_ms`` the CPU time the worker spent on the
    call (0 when unknown: the worker died); ``duration_ms`` the wall time from submission to
    the answer, waiting for a worker included."""

    ok: bool
    request: TransformRequest | None
    logs: list[str] = field(default_factory=list)
    error: TransformError | None = None
    cpu_ms: float = 0.0
    duration_ms: float = 0.0

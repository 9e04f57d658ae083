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


_UNSET: Any = object()


class TransformRequest:
    """The request a transformation sees and returns, as Hookdeck's ``request``: ``headers``
    (lower-case names to string values), ``body`` (the parsed JSON value when the event's body
    is JSON, the raw text otherwise; a ``str`` either way means a JS string), ``query`` (the raw
    query string, without ``?``) and ``path``.

    The body can be given, or held, as its JSON text instead (``body_json``): the pool splices
    that text into what it sends and a result's body arrives that way, so a multi-megabyte body
    is neither encoded nor parsed in the calling process. ``body`` parses it on first use;
    ``body_json`` encodes ``body`` on first use. A result's ``body_json`` is what the engine's
    ``JSON.stringify`` wrote: send it as the delivered body of a JSON request."""

    __slots__ = ("_body", "_body_json", "headers", "path", "query")

    def __init__(
        self,
        headers: Mapping[str, str],
        body: Any = _UNSET,
        query: str = "",
        path: str = "/",
        *,
        body_json: str | None = None,
    ) -> None:
        if (body is _UNSET) == (body_json is None):
            raise TypeError("give the body either as a value or as body_json")
        self.headers = headers
        self.query = query
        self.path = path
        self._body = body
        self._body_json = body_json

    @property
    def body(self) -> Any:
        if self._body is _UNSET:
            self._body = json.loads(self.body_json)
        return self._body

    @property
    def body_json(self) -> str:
        if self._body_json is None:
            self._body_json = _dumps(self._body)
        return self._body_json

    def to_json(self) -> str:
        """The request as the JSON text a worker hands to the engine."""
        rest = _dumps({"headers": dict(self.headers), "query": self.query, "path": self.path})
        return '{"body":' + self.body_json + "," + rest[1:]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransformRequest):
            return NotImplemented
        return (dict(self.headers), self.body, self.query, self.path) == (
            dict(other.headers),
            other.body,
            other.query,
            other.path,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        body = (
            repr(self._body)
            if self._body is not _UNSET
            else f"<{len(self.body_json)} bytes of JSON>"
        )
        return (
            f"TransformRequest(headers={dict(self.headers)!r}, body={body[:200]},"
            f" query={self.query!r}, path={self.path!r})"
        )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


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

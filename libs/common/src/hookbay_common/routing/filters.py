"""Route filters: which events a route delivers, decided by the request's body, headers and
query.

    f = compile_filter(spec)            # once, when the route is saved or loaded; None: match all
    v = f.evaluate(Subject.from_request(body, content_type, headers, query))
    v.matched, v.reason                 # reason: the first failing condition, for owners

The syntax and semantics are the owner's page, docs/owners/filters.md. ``compile_filter``
validates everything and raises ``FilterError``; ``evaluate`` never raises and never validates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from hookbay_common.routing.compiler import MAX_DEPTH, MAX_STRING, MAX_VALUES, compile_scopes
from hookbay_common.routing.errors import FilterError
from hookbay_common.routing.nodes import Node
from hookbay_common.routing.subject import Subject

__all__ = [
    "MATCHED",
    "MAX_DEPTH",
    "MAX_STRING",
    "MAX_VALUES",
    "Filter",
    "FilterError",
    "Subject",
    "Verdict",
    "compile_filter",
]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A filter's answer. When not ``matched``, ``reason`` names the first failing condition
    in an owner's words followed by its place in the filter (``body.type: "charge.failed" is
    not $eq "invoice.paid" (filter /body/type)``), and ``pointer`` is that place alone (RFC 6901)."""

    matched: bool
    reason: str | None = None
    pointer: str | None = None


MATCHED: Final = Verdict(matched=True)


class Filter:
    """A compiled filter: every scope's condition must hold. Immutable, safe to share between
    tasks and threads; ``evaluate`` costs a walk of the filter's conditions over the values
    they name, never more than the filter's depth in recursion."""

    __slots__ = ("_scopes",)

    def __init__(self, scopes: tuple[tuple[str, Node], ...]) -> None:
        self._scopes = scopes

    def evaluate(self, subject: Subject) -> Verdict:
        for scope, node in self._scopes:
            failure = node.test(getattr(subject, scope))
            if failure is not None:
                text = f"{failure.text()} (filter {failure.pointer})"
                return Verdict(matched=False, reason=text, pointer=failure.pointer)
        return MATCHED

    def matches(self, subject: Subject) -> bool:
        return self.evaluate(subject).matched


def compile_filter(spec: object) -> Filter | None:
    """The filter a specification describes (``{"body"?: …, "headers"?: …, "query"?: …}``), or
    ``None`` for ``None`` (no filter: every event matches). ``{}`` compiles to a filter that
    matches everything. Raises ``FilterError`` naming the JSON pointer of the first problem."""
    if spec is None:
        return None
    return Filter(compile_scopes(spec))

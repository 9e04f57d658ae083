"""A compiled filter: a tree of small condition nodes, each testing one subject value.

``test(value)`` returns ``None`` when the condition holds, else a ``Failure`` that names the node
and the value; the words of a reason are only put together when someone reads them
(``Failure.text()``), so a failure that a ``$not`` or an ``$or`` absorbs costs no formatting.
Nothing here validates: the compiler (``compiler``) has refused every malformed specification
before a node exists. Recursion follows the tree, whose depth the compiler bounds; arrays are
looked into one level at a time, never recursively, so a deeply nested body adds no depth."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from hookbay_common.routing.values import MISSING, kind, render

Predicate = Callable[[object], bool]

_SHOWN_BRANCHES: Final = 3
_HINTED_OPS: Final = frozenset({"$eq", "$gt", "$gte", "$lt", "$lte", "$startsWith", "$endsWith"})


class Failure:
    """Why a node did not hold for a value; ``cause`` is the failure underneath it, if any
    (``$or``: one per branch; an array: the first element's)."""

    __slots__ = ("cause", "node", "value")

    def __init__(self, node: Node, value: object, cause: tuple[Failure, ...] = ()) -> None:
        self.node = node
        self.value = value
        self.cause = cause

    @property
    def pointer(self) -> str:
        return self.node.pointer

    def text(self) -> str:
        return self.node.explain(self)


class Node:
    """One condition. ``pointer``: where it is written in the specification (RFC 6901);
    ``where``: the subject path it reads, as an owner writes it (``body.data.object.id``)."""

    __slots__ = ("pointer", "where")

    def __init__(self, pointer: str, where: str) -> None:
        self.pointer = pointer
        self.where = where

    def test(self, value: object) -> Failure | None:
        raise NotImplementedError

    def explain(self, failure: Failure) -> str:
        return f"{self.where}: {render(failure.value)} does not match"


class ValueTest(Node):
    """A value operator (``$eq``, ``$gt``, ``$startsWith``, …) as a precompiled predicate. A
    missing value never satisfies it, ``$neq`` and ``$nin`` included."""

    __slots__ = ("op", "operand", "predicate")

    def __init__(
        self, pointer: str, where: str, op: str, operand: object, predicate: Predicate
    ) -> None:
        super().__init__(pointer, where)
        self.op = op
        self.operand = operand
        self.predicate = predicate

    def test(self, value: object) -> Failure | None:
        if value is MISSING or not self.predicate(value):
            return Failure(self, value)
        return None

    def explain(self, failure: Failure) -> str:
        value = failure.value
        if value is MISSING:
            return f"{self.where}: missing"
        text = f"{self.where}: {render(value)} is not {self.op} {render(self.operand)}"
        return text + _hint(self.op, value, self.operand)


def _hint(op: str, value: object, operand: object) -> str:
    """Why a comparison of two kinds failed, when that is the reason: no conversion is made."""
    scalars = (str, int, float, bool, type(None))
    if op not in _HINTED_OPS or not isinstance(value, scalars) or not isinstance(operand, scalars):
        return ""
    if kind(value) == kind(operand):
        return ""
    return f"; a {kind(value)} never equals or compares with a {kind(operand)}"


class Exists(Node):
    """``$exist``: presence of the value (``null`` is present)."""

    __slots__ = ("expected",)

    def __init__(self, pointer: str, where: str, expected: bool) -> None:
        super().__init__(pointer, where)
        self.expected = expected

    def test(self, value: object) -> Failure | None:
        if (value is not MISSING) is self.expected:
            return None
        return Failure(self, value)

    def explain(self, failure: Failure) -> str:
        if self.expected:
            return f"{self.where}: missing"
        return f"{self.where}: present ({render(failure.value)}), not $exist false"


class AllOf(Node):
    """``$and``, and several operators in one object: every node holds; the first failure is
    the reason."""

    __slots__ = ("nodes",)

    def __init__(self, pointer: str, where: str, nodes: tuple[Node, ...]) -> None:
        super().__init__(pointer, where)
        self.nodes = nodes

    def test(self, value: object) -> Failure | None:
        for node in self.nodes:
            failure = node.test(value)
            if failure is not None:
                return failure
        return None


class AnyOf(Node):
    """``$or``: some branch holds."""

    __slots__ = ("nodes",)

    def __init__(self, pointer: str, where: str, nodes: tuple[Node, ...]) -> None:
        super().__init__(pointer, where)
        self.nodes = nodes

    def test(self, value: object) -> Failure | None:
        failures = []
        for node in self.nodes:
            failure = node.test(value)
            if failure is None:
                return None
            failures.append(failure)
        return Failure(self, value, tuple(failures))

    def explain(self, failure: Failure) -> str:
        shown = "; ".join(f.text() for f in failure.cause[:_SHOWN_BRANCHES])
        more = "; …" if len(failure.cause) > _SHOWN_BRANCHES else ""
        return f"{self.where}: no $or branch holds ({shown}{more})"


class Not(Node):
    """``$not``: the logical negation of its condition, whatever the value (a missing one
    included: ``{"$not": {"$eq": 1}}`` holds for a missing key)."""

    __slots__ = ("inner", "shown")

    def __init__(self, pointer: str, where: str, inner: Node, shown: str) -> None:
        super().__init__(pointer, where)
        self.inner = inner
        self.shown = shown

    def test(self, value: object) -> Failure | None:
        if self.inner.test(value) is None:
            return Failure(self, value)
        return None

    def explain(self, failure: Failure) -> str:
        return f"{self.where}: {render(failure.value)} matches $not {self.shown}"


class Fields(Node):
    """An object of field conditions, with any ``$and``/``$or``/``$not`` written beside them.

    ``entries`` pairs a key with its node, in the specification's order; a ``None`` key marks a
    logical operator, tested on the value itself. On an object each key reads its field
    (missing when absent); on an array the whole object must hold for some element (one level:
    an element that is itself an array has no fields); on anything else every field is
    missing (a path into a string, a number or ``null`` leads nowhere)."""

    __slots__ = ("entries",)

    def __init__(
        self, pointer: str, where: str, entries: tuple[tuple[str | None, Node], ...]
    ) -> None:
        super().__init__(pointer, where)
        self.entries = entries

    def test(self, value: object) -> Failure | None:
        if isinstance(value, dict):
            return self._test_object(value, value)
        if isinstance(value, list):
            first: Failure | None = None
            for element in value:
                failure = self._test_object(element if isinstance(element, dict) else None, element)
                if failure is None:
                    return None
                first = first or failure
            return Failure(self, value, (first,) if first is not None else ())
        return self._test_object(None, value)

    def _test_object(self, fields: dict[str, object] | None, value: object) -> Failure | None:
        for key, node in self.entries:
            if key is None:
                failure = node.test(value)
            else:
                failure = node.test(fields.get(key, MISSING) if fields is not None else MISSING)
            if failure is not None:
                return failure
        return None

    def explain(self, failure: Failure) -> str:
        if not failure.cause:
            return f"{self.where}: an empty array, no element to match"
        return f"{self.where}: no element matches (the first: {failure.cause[0].text()})"

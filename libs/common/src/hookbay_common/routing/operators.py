"""What each value operator means, as a predicate built once per condition.

Every predicate takes a present subject value (absence is the nodes' business: it fails them
all) and never converts between kinds: numbers compare with numbers, strings with strings, a
boolean is not a number. The equality family (``$eq``, ``$in`` and their negations) also looks
one level into an array: ``{"tags": "urgent"}`` holds for ``["urgent", "late"]``."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final

from hookbay_common.routing.values import is_number, strict_equal

Predicate = Callable[[object], bool]

ORDERING: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def equality(operands: list[object]) -> Predicate:
    """Strict membership of a value in ``operands``, or of one of its elements when the value
    is an array (``$eq`` is one operand, ``$in`` several)."""
    one = same_as_any(operands)
    return lambda value: one(value) or (isinstance(value, list) and any(one(e) for e in value))


def same_as_any(operands: list[object]) -> Predicate:
    """Strict equality of a value with one of ``operands``. Scalars are looked up in sets kept
    per kind, so ``true`` never finds ``1`` and ``"5"`` never finds ``5``; arrays and objects
    compare deeply."""
    strings = frozenset(o for o in operands if isinstance(o, str))
    numbers = frozenset(o for o in operands if is_number(o))
    flags = frozenset(o for o in operands if isinstance(o, bool))
    has_null = any(o is None for o in operands)
    containers = [o for o in operands if isinstance(o, list | dict)]

    def one(value: object) -> bool:
        if isinstance(value, str):
            return value in strings
        if value.__class__ is bool:
            return value in flags
        if is_number(value):
            return value in numbers
        if value is None:
            return has_null
        return any(strict_equal(value, o) for o in containers)

    return one


def negation(predicate: Predicate) -> Predicate:
    """``$neq`` and ``$nin``: the value is present (the node checks) and the predicate fails."""
    return lambda value: not predicate(value)


def ordering(op: str, operand: str | int | float) -> Predicate:
    """``$gt``/``$gte``/``$lt``/``$lte``: number with number, string with string (by Unicode
    code point, so ``"10" < "9"``); any other pairing is false."""
    compare = ORDERING[op]
    if isinstance(operand, str):
        return lambda value: isinstance(value, str) and bool(compare(value, operand))
    return lambda value: is_number(value) and bool(compare(value, operand))


def prefix(op: str, operands: tuple[str, ...]) -> Predicate:
    """``$startsWith``/``$endsWith``: a string value with any of the operands at that end."""
    if op == "$startsWith":
        return lambda value: isinstance(value, str) and value.startswith(operands)
    return lambda value: isinstance(value, str) and value.endswith(operands)


def contains(operand: object) -> Predicate:
    """``$contains``: a substring of a string value (a string operand), or an element of an
    array value, strictly equal to the operand. An object value never contains anything."""
    one = same_as_any([operand])
    if isinstance(operand, str):
        text = operand
        return lambda value: (isinstance(value, str) and text in value) or (
            isinstance(value, list) and any(one(e) for e in value)
        )
    return lambda value: isinstance(value, list) and any(one(e) for e in value)

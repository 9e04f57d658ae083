"""JSON values as filters see them: absence, kinds, strict equality and short renderings.

Equality is strict (no conversion between kinds: ``"5"`` is not ``5``, ``true`` is not ``1``);
numbers compare by value, so ``1`` equals ``1.0``. Every function here is bounded by the size of
the filter's operand or by a fixed budget, never by the depth of the subject: a deeply nested
body cannot make them recurse."""

from __future__ import annotations

import json
from typing import Final


class _Missing:
    """The value of a path that leads nowhere (a key that is absent, or a path into a value
    that is not an object)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def is_number(value: object) -> bool:
    """A JSON number: an int or a float, never a bool."""
    return value.__class__ is int or value.__class__ is float


def kind(value: object) -> str:
    """The JSON kind of a value, as an owner reads it in a reason."""
    if value is MISSING:
        return "missing"
    if value is None:
        return "null"
    if value.__class__ is bool:
        return "boolean"
    if is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def strict_equal(value: object, operand: object) -> bool:
    """Deep, strict equality of a subject value with a filter operand. Recursion follows the
    operand (whose depth the filter's limits bound), so it stops at the operand's leaves."""
    if operand is None or operand.__class__ is bool:
        return value is operand
    if operand.__class__ is str:
        return value.__class__ is str and value == operand
    if is_number(operand):
        return is_number(value) and value == operand
    if isinstance(operand, list):
        return (
            isinstance(value, list)
            and len(value) == len(operand)
            and all(strict_equal(v, o) for v, o in zip(value, operand, strict=True))
        )
    if isinstance(operand, dict):
        return (
            isinstance(value, dict)
            and value.keys() == operand.keys()
            and all(strict_equal(value[k], o) for k, o in operand.items())
        )
    return False


_STRING_CHARS: Final = 60
_ITEMS: Final = 3


def render(value: object, depth: int = 2) -> str:
    """A short, JSON-looking rendering of a value for a reason: strings cut at 60 characters,
    at most 3 items of an array or object, 2 levels deep (``[1, 2, 3, … 7 more]``)."""
    if value is MISSING:
        return "missing"
    if isinstance(value, str):
        if len(value) > _STRING_CHARS:
            return json.dumps(value[:_STRING_CHARS], ensure_ascii=False)[:-1] + '…"'
        return json.dumps(value, ensure_ascii=False)
    if value is None or value.__class__ is bool or is_number(value):
        return json.dumps(value)
    if isinstance(value, list):
        if not value:
            return "[]"
        if depth <= 0:
            return f"[… {len(value)} items]"
        shown = [render(v, depth - 1) for v in value[:_ITEMS]]
        return "[" + ", ".join(shown) + _more(len(value)) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        if depth <= 0:
            return f"{{… {len(value)} keys}}"
        items = list(value.items())[:_ITEMS]
        shown = [f"{render(str(k))}: {render(v, depth - 1)}" for k, v in items]
        return "{" + ", ".join(shown) + _more(len(value)) + "}"
    return repr(value)


def _more(count: int) -> str:
    return f", … {count - _ITEMS} more" if count > _ITEMS else ""

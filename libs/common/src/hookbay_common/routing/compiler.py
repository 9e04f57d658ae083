"""From a filter specification to condition nodes, refusing anything malformed.

Every refusal is a ``FilterError`` naming the JSON pointer of the offending part. The size
limits are checked first, without recursion, so the recursive compilation that follows (and
every evaluation of its result) is as deep as the limits allow and no deeper."""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from typing import Final

from hookbay_common.routing import operators
from hookbay_common.routing.errors import FilterError, pointer_to
from hookbay_common.routing.nodes import AllOf, AnyOf, Exists, Fields, Node, Not, ValueTest
from hookbay_common.routing.values import is_number, render

MAX_DEPTH: Final = 16
"""Levels of nesting, the whole specification being level 1 and each segment of a dotted key a
level of its own."""
MAX_VALUES: Final = 1000
"""JSON values in the whole specification (each object, array, string, number, boolean and
null counts one)."""
MAX_STRING: Final = 4096
"""Characters in any one string or key."""

SCOPES: Final = ("body", "headers", "query")
VALUE_OPS: Final = frozenset(
    {"$eq", "$neq", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exist", "$startsWith",
     "$endsWith", "$contains"}
)  # fmt: skip
LOGICAL_OPS: Final = frozenset({"$and", "$or", "$not"})
OPERATORS: Final = VALUE_OPS | LOGICAL_OPS

Compile = Callable[[object, str, str], Node]


def compile_scopes(spec: object) -> tuple[tuple[str, Node], ...]:
    """The specification's scopes as ``(scope, node)`` in the order written; a scope whose
    filter is ``{}`` or ``null`` is left out (no condition on it: a schema that writes every
    optional field, ``{"body": …, "headers": null, "query": null}``, means what it says)."""
    check_limits(spec)
    if not isinstance(spec, dict):
        raise FilterError("", "a filter is an object with body, headers or query")
    scopes = []
    for name, scope_spec in spec.items():
        if name not in SCOPES:
            raise FilterError(
                pointer_to("", name), f"unknown key {name!r}: a filter has body, headers or query"
            )
        node = _ScopeCompiler(name).root(scope_spec, pointer_to("", name))
        if node is not None:
            scopes.append((name, node))
    return tuple(scopes)


def check_limits(spec: object) -> None:
    """Refuse a specification that is not plain JSON or exceeds ``MAX_DEPTH``, ``MAX_VALUES``
    or ``MAX_STRING``; iterative, so any nesting is measured without recursion."""
    stack: list[tuple[object, str, int]] = [(spec, "", 1)]
    count = 0
    while stack:
        value, pointer, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise FilterError("", f"the filter is too large: more than {MAX_VALUES} values")
        if depth > MAX_DEPTH:
            raise FilterError(pointer, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise FilterError(pointer, "object keys must be strings")
                child = pointer_to(pointer, key)
                _check_string(key, child)
                stack.append((item, child, depth + 1 + key.count(".")))
        elif isinstance(value, list):
            stack.extend((item, pointer_to(pointer, i), depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_string(value, pointer)
        elif isinstance(value, float) and not math.isfinite(value):
            raise FilterError(pointer, "numbers must be finite")
        elif value is not None and not isinstance(value, bool | int | float):
            raise FilterError(pointer, f"not a JSON value: {type(value).__name__}")


def _check_string(text: str, pointer: str) -> None:
    if len(text) > MAX_STRING:
        raise FilterError(pointer, f"a string longer than {MAX_STRING} characters")


class _ScopeCompiler:
    """Compiles one scope. ``body`` is JSON: nested objects and dotted keys are paths.
    ``headers`` and ``query`` are flat maps of names to text: a name is never split on dots
    (names may hold them), header names are lowercased, and every operand must be text."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.text = scope != "body"

    def root(self, spec: object, pointer: str) -> Node | None:
        if spec is None or spec == {}:
            return None
        if self.text:
            if not isinstance(spec, dict):
                raise FilterError(pointer, f"{self.scope} takes an object of names")
            return self.names(spec, pointer, self.scope)
        return self.condition(spec, pointer, self.scope)

    # body: any JSON condition ------------------------------------------------------------

    def condition(self, spec: object, pointer: str, where: str) -> Node:
        """A literal (``$eq``), an object of operators, or an object of fields (with any
        ``$and``/``$or``/``$not`` beside them)."""
        if not isinstance(spec, dict):
            return self.operator("$eq", spec, pointer, where)
        ops, fields = self._split(spec, pointer)
        if not fields:
            return self._all(spec, pointer, where, self.condition)
        value_ops = [op for op in ops if op in VALUE_OPS]
        if value_ops:
            raise FilterError(
                pointer_to(pointer, value_ops[0]),
                f"{value_ops[0]} sits beside the field {fields[0]!r}: an operator tests this "
                "value, a field a key inside it; write them in separate conditions",
            )
        entries: list[tuple[str | None, Node]] = []
        for key, sub in spec.items():
            child = pointer_to(pointer, key)
            if key in LOGICAL_OPS:
                entries.append((None, self.operator(key, sub, child, where)))
            else:
                entries.append(self._path(key, sub, child, where))
        return Fields(pointer, where, tuple(entries))

    def _path(self, key: str, spec: object, pointer: str, where: str) -> tuple[str, Node]:
        """A field, its dotted key read as nested objects: ``{"a.b": 1}`` is ``{"a": {"b": 1}}``."""
        segments = key.split(".")
        for segment in segments:
            if not segment:
                raise FilterError(pointer, f"the path {key!r} has an empty segment")
            if segment.startswith("$"):
                raise FilterError(pointer, f"the path {key!r} has a segment starting with '$'")
        wheres = [f"{where}.{'.'.join(segments[: i + 1])}" for i in range(len(segments))]
        node = self.condition(spec, pointer, wheres[-1])
        for i in range(len(segments) - 1, 0, -1):
            node = Fields(pointer, wheres[i - 1], ((segments[i], node),))
        return segments[0], node

    # headers and query: names, then text conditions --------------------------------------

    def names(self, spec: object, pointer: str, where: str) -> Node:
        if not isinstance(spec, dict) or not spec:
            raise FilterError(pointer, f"{self.scope} conditions are a non-empty object of names")
        ops, _ = self._split(spec, pointer)
        for op in ops:
            if op in VALUE_OPS:
                raise FilterError(
                    pointer_to(pointer, op),
                    f"{op} needs a {self._item}: {{{self.scope!r}: {{<name>: {{{op!r}: …}}}}}}",
                )
        entries: list[tuple[str | None, Node]] = []
        seen: set[str] = set()
        for key, sub in spec.items():
            child = pointer_to(pointer, key)
            if key in LOGICAL_OPS:
                entries.append((None, self._logical(key, sub, child, where, self.names)))
                continue
            name = key.lower() if self.scope == "headers" else key
            if name in seen:
                raise FilterError(child, f"the header {name!r} is named twice (names ignore case)")
            seen.add(name)
            entries.append((name, self.text_condition(sub, child, f"{where}.{name}")))
        return Fields(pointer, where, tuple(entries))

    def text_condition(self, spec: object, pointer: str, where: str) -> Node:
        if not isinstance(spec, dict):
            return self.operator("$eq", spec, pointer, where)
        _, fields = self._split(spec, pointer)
        if fields:
            raise FilterError(
                pointer_to(pointer, fields[0]),
                f"{self._item} values are text, with no fields inside: use an operator such as "
                '{"$eq": "…"} or {"$startsWith": "…"}',
            )
        return self._all(spec, pointer, where, self.text_condition)

    @property
    def _item(self) -> str:
        return "header" if self.scope == "headers" else "query parameter"

    # operators ------------------------------------------------------------------------------

    def _split(self, spec: dict[str, object], pointer: str) -> tuple[list[str], list[str]]:
        """The object's operator keys and field keys; an unknown operator is refused."""
        if not spec:
            raise FilterError(
                pointer, 'an empty object holds for everything: remove it or write {"$exist": true}'
            )
        ops, fields = [], []
        for key in spec:
            if not key.startswith("$"):
                fields.append(key)
                continue
            if key not in OPERATORS:
                close = difflib.get_close_matches(key, sorted(OPERATORS), n=1, cutoff=0.8)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise FilterError(pointer_to(pointer, key), f"unknown operator {key}{hint}")
            ops.append(key)
        return ops, fields

    def _all(self, spec: dict[str, object], pointer: str, where: str, sub: Compile) -> Node:
        nodes = [
            self._logical(op, operand, pointer_to(pointer, op), where, sub)
            if op in LOGICAL_OPS
            else self.operator(op, operand, pointer_to(pointer, op), where)
            for op, operand in spec.items()
        ]
        return nodes[0] if len(nodes) == 1 else AllOf(pointer, where, tuple(nodes))

    def operator(self, op: str, operand: object, pointer: str, where: str) -> Node:
        """A value operator (a logical one inside body conditions too)."""
        if op in LOGICAL_OPS:
            return self._logical(op, operand, pointer, where, self.condition)
        if op == "$exist":
            if not isinstance(operand, bool):
                raise FilterError(pointer, "$exist needs true or false")
            return Exists(pointer, where, operand)
        if op in ("$eq", "$neq"):
            self._literal(operand, pointer, op, lists=not self.text or self.scope == "query")
            predicate = operators.equality([operand])
        elif op in ("$in", "$nin"):
            if not isinstance(operand, list):
                raise FilterError(pointer, f"{op} needs a list of values")
            for i, item in enumerate(operand):
                self._literal(item, pointer_to(pointer, i), op, lists=not self.text)
            predicate = operators.equality(operand)
        elif op in operators.ORDERING:
            if not (isinstance(operand, str) or (is_number(operand) and not self.text)):
                raise FilterError(pointer, self._needs(op, "a number or a string", "a string"))
            predicate = operators.ordering(op, operand)  # type: ignore[arg-type]
        elif op in ("$startsWith", "$endsWith"):
            strings = [operand] if isinstance(operand, str) else operand
            if (
                not isinstance(strings, list)
                or not strings
                or not all(isinstance(s, str) for s in strings)
            ):
                raise FilterError(pointer, f"{op} needs a string or a non-empty list of strings")
            predicate = operators.prefix(op, tuple(strings))
        else:  # $contains
            self._literal(operand, pointer, op, lists=not self.text)
            predicate = operators.contains(operand)
        if op in ("$neq", "$nin"):
            predicate = operators.negation(predicate)
        return ValueTest(pointer, where, op, operand, predicate)

    def _logical(self, op: str, operand: object, pointer: str, where: str, sub: Compile) -> Node:
        if op == "$not":
            if not isinstance(operand, dict):
                raise FilterError(pointer, "$not needs an object (a condition)")
            return Not(pointer, where, sub(operand, pointer, where), render(operand))
        if not isinstance(operand, list) or not operand:
            raise FilterError(pointer, f"{op} needs a non-empty list of objects (conditions)")
        nodes = []
        for i, item in enumerate(operand):
            child = pointer_to(pointer, i)
            if not isinstance(item, dict):
                raise FilterError(child, f"{op} needs a non-empty list of objects (conditions)")
            nodes.append(sub(item, child, where))
        return (
            AnyOf(pointer, where, tuple(nodes))
            if op == "$or"
            else AllOf(pointer, where, tuple(nodes))
        )

    def _literal(self, value: object, pointer: str, op: str, *, lists: bool) -> None:
        """An operand compared as data: no operators inside; text only in headers and query
        (a list of strings where ``lists``: a repeated query parameter)."""
        if self.text:
            if isinstance(value, str):
                return
            if lists and isinstance(value, list) and all(isinstance(v, str) for v in value):
                return
            example = f': write "{value}"' if is_number(value) or isinstance(value, bool) else ""
            raise FilterError(
                pointer, f"{self._item} values are text: {op} needs a string here{example}"
            )
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                for key, sub in item.items():
                    if key.startswith("$"):
                        raise FilterError(
                            pointer, f"{key} inside the value of {op}: an operand is plain data"
                        )
                    stack.append(sub)
            elif isinstance(item, list):
                stack.extend(item)

    def _needs(self, op: str, body: str, text: str) -> str:
        if self.text:
            return f"{self._item} values are text: {op} needs {text}"
        return f"{op} needs {body}"

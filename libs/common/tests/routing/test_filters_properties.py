"""Laws of the filter language over generated filters and subjects: ``$not`` is negation
(a missing value included), ``$and``/``$or`` are conjunction and disjunction, a literal is
``$eq``, a dotted key is nesting, and every non-match names a place that exists in the filter."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hookbay_common.routing.errors import pointer_segments
from hookbay_common.routing.filters import Filter, Subject, compile_filter

REPRODUCIBLE = settings(derandomize=True, database=None, max_examples=100, deadline=None)
THOROUGH = settings(REPRODUCIBLE, max_examples=300)
"""For the ``$not`` laws the filter language promises owners; the rest run fewer examples."""

KEYS = st.sampled_from(["a", "b"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from([0.0, 1.0, 1.5]),
    st.text(alphabet="ab", max_size=2),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, min_size=1, max_size=2)
    ),
    max_leaves=6,
)
LITERALS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=4)
TEXT = st.text(alphabet="ab", max_size=2)
VALUE_OPERATORS = st.one_of(
    st.builds(lambda v: {"$eq": v}, JSON),
    st.builds(lambda v: {"$neq": v}, JSON),
    st.builds(lambda v: {"$in": v}, st.lists(JSON, max_size=3)),
    st.builds(lambda v: {"$nin": v}, st.lists(JSON, max_size=3)),
    st.builds(
        lambda op, v: {op: v},
        st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
        st.one_of(st.integers(-2, 2), st.just(1.5), TEXT),
    ),
    st.builds(lambda v: {"$exist": v}, st.booleans()),
    st.builds(lambda op, v: {op: v}, st.sampled_from(["$startsWith", "$endsWith"]), TEXT),
    st.builds(lambda v: {"$contains": v}, JSON),
)


def objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Conditions written as objects: operators, fields (dotted or not, each a literal or a
    condition), logical operators."""
    fields = st.dictionaries(
        st.sampled_from(["a", "b", "a.b"]), LITERALS | children, min_size=1, max_size=2
    )
    return st.one_of(
        VALUE_OPERATORS,
        fields,
        st.builds(lambda v: {"$and": v}, st.lists(children, min_size=1, max_size=2)),
        st.builds(lambda v: {"$or": v}, st.lists(children, min_size=1, max_size=2)),
        st.builds(lambda v: {"$not": v}, children),
    )


OBJECT_CONDITIONS = st.recursive(VALUE_OPERATORS, objects, max_leaves=6)
CONDITIONS = LITERALS | OBJECT_CONDITIONS
BODIES = st.one_of(JSON, st.dictionaries(KEYS, JSON, max_size=2))
OBJECT_BODIES = st.dictionaries(KEYS, JSON, max_size=2)


def create_filter(spec: Any) -> Filter:
    compiled = compile_filter(spec)
    assert compiled is not None
    return compiled


def matches(condition: Any, body: Any) -> bool:
    return create_filter({"body": condition}).evaluate(Subject(body)).matched


class TestNot:
    @THOROUGH
    @given(condition=OBJECT_CONDITIONS, body=BODIES)
    def test_not_is_negation_of_the_body(self, condition: Any, body: Any) -> None:
        assert matches({"$not": condition}, body) is not matches(condition, body)

    @THOROUGH
    @given(condition=OBJECT_CONDITIONS, body=OBJECT_BODIES)
    def test_not_is_negation_of_a_field_missing_or_not(self, condition: Any, body: Any) -> None:
        assert matches({"a": {"$not": condition}}, body) is not matches({"a": condition}, body)

    @REPRODUCIBLE
    @given(condition=OBJECT_CONDITIONS, body=BODIES)
    def test_double_negation(self, condition: Any, body: Any) -> None:
        assert matches({"$not": {"$not": condition}}, body) is matches(condition, body)


class TestAndOr:
    @REPRODUCIBLE
    @given(conditions=st.lists(OBJECT_CONDITIONS, min_size=1, max_size=3), body=BODIES)
    def test_and_is_all_or_is_any(self, conditions: list[Any], body: Any) -> None:
        each = [matches(c, body) for c in conditions]
        assert matches({"$and": conditions}, body) is all(each)
        assert matches({"$or": conditions}, body) is any(each)

    @REPRODUCIBLE
    @given(first=OBJECT_CONDITIONS, second=OBJECT_CONDITIONS, body=BODIES)
    def test_de_morgan(self, first: Any, second: Any, body: Any) -> None:
        negated_or = {"$not": {"$or": [first, second]}}
        and_of_nots = {"$and": [{"$not": first}, {"$not": second}]}
        assert matches(negated_or, body) is matches(and_of_nots, body)


class TestShorthands:
    @REPRODUCIBLE
    @given(literal=LITERALS, body=OBJECT_BODIES)
    def test_a_literal_is_eq(self, literal: Any, body: Any) -> None:
        assert matches({"a": literal}, body) is matches({"a": {"$eq": literal}}, body)

    @REPRODUCIBLE
    @given(condition=CONDITIONS, body=BODIES)
    def test_a_dotted_key_is_nesting(self, condition: Any, body: Any) -> None:
        assert matches({"a.b": condition}, body) is matches({"a": {"b": condition}}, body)

    @REPRODUCIBLE
    @given(literal=JSON, body=OBJECT_BODIES)
    def test_neq_is_present_and_not_eq(self, literal: Any, body: Any) -> None:
        present = "a" in body
        assert matches({"a": {"$neq": literal}}, body) is (
            present and not matches({"a": {"$eq": literal}}, body)
        )


class TestReasons:
    @REPRODUCIBLE
    @given(condition=CONDITIONS, body=BODIES)
    def test_a_non_match_names_a_place_in_the_filter(self, condition: Any, body: Any) -> None:
        spec = {"body": condition}
        verdict = create_filter(spec).evaluate(Subject(body))
        if verdict.matched:
            assert (verdict.reason, verdict.pointer) == (None, None)
            return
        assert verdict.pointer is not None
        assert verdict.reason is not None
        assert verdict.reason.endswith(f"(filter {verdict.pointer})")
        node: Any = spec
        for segment in pointer_segments(verdict.pointer):
            node = node[int(segment)] if isinstance(node, list) else node[segment]

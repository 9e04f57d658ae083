"""Specifications refused at save time, each with the JSON pointer of its problem, and the
size limits."""

from __future__ import annotations

from typing import Any

import pytest

from hookbay_common.routing.compiler import MAX_DEPTH, MAX_STRING, MAX_VALUES
from hookbay_common.routing.filters import FilterError, Subject, compile_filter


def refusal(spec: Any) -> FilterError:
    with pytest.raises(FilterError) as caught:
        compile_filter(spec)
    return caught.value


def nested(depth: int) -> dict[str, Any]:
    """A specification ``depth`` levels deep: the whole, then ``a`` objects, a leaf."""
    condition: Any = 1
    for _ in range(depth - 2):
        condition = {"a": condition}
    return {"body": condition}


class TestRefusals:
    @pytest.mark.parametrize(
        ("spec", "pointer", "message"),
        [
            ([], "", "a filter is an object with body, headers or query"),
            ({"path": "/x"}, "/path", "unknown key 'path': a filter has body, headers or query"),
            ({"body": {"amount": {"$gtx": 1}}}, "/body/amount/$gtx",
             "unknown operator $gtx (did you mean $gt?)"),
            ({"body": {"$regex": "a.*"}}, "/body/$regex", "unknown operator $regex"),
            ({"body": {"a": {"$in": "paid"}}}, "/body/a/$in", "$in needs a list of values"),
            ({"body": {"a": {"$nin": {"x": 1}}}}, "/body/a/$nin", "$nin needs a list of values"),
            ({"body": {"a": {"$gt": True}}}, "/body/a/$gt", "$gt needs a number or a string"),
            ({"body": {"a": {"$lte": None}}}, "/body/a/$lte", "$lte needs a number or a string"),
            ({"body": {"a": {"$lt": [1]}}}, "/body/a/$lt", "$lt needs a number or a string"),
            ({"body": {"a": {"$exist": "yes"}}}, "/body/a/$exist", "$exist needs true or false"),
            ({"body": {"a": {"$exist": 1}}}, "/body/a/$exist", "$exist needs true or false"),
            ({"body": {"a": {"$startsWith": 1}}}, "/body/a/$startsWith",
             "$startsWith needs a string or a non-empty list of strings"),
            ({"body": {"a": {"$endsWith": []}}}, "/body/a/$endsWith",
             "$endsWith needs a string or a non-empty list of strings"),
            ({"body": {"$and": []}}, "/body/$and", "$and needs a non-empty list of objects (conditions)"),
            ({"body": {"$or": {"a": 1}}}, "/body/$or", "$or needs a non-empty list of objects (conditions)"),
            ({"body": {"a": {"$or": [1, 5]}}}, "/body/a/$or/0",
             "$or needs a non-empty list of objects (conditions)"),
            ({"body": {"$not": [{"a": 1}]}}, "/body/$not", "$not needs an object (a condition)"),
            ({"body": {"a": {"$not": 1}}}, "/body/a/$not", "$not needs an object (a condition)"),
            ({"body": {"a": {}}}, "/body/a",
             'an empty object holds for everything: remove it or write {"$exist": true}'),
            ({"body": {"$or": [{}]}}, "/body/$or/0",
             'an empty object holds for everything: remove it or write {"$exist": true}'),
            ({"body": {"a": {"$gt": 1, "b": 2}}}, "/body/a/$gt",
             "$gt sits beside the field 'b': an operator tests this value, a field a key inside "
             "it; write them in separate conditions"),
            ({"body": {"a..b": 1}}, "/body/a..b", "the path 'a..b' has an empty segment"),
            ({"body": {"a.$gt": 1}}, "/body/a.$gt", "the path 'a.$gt' has a segment starting with '$'"),
            ({"body": {"a": {"$eq": {"$gt": 1}}}}, "/body/a/$eq",
             "$gt inside the value of $eq: an operand is plain data"),
            ({"body": {"a": [{"$gt": 1}]}}, "/body/a",
             "$gt inside the value of $eq: an operand is plain data"),
            ({"body": {"a": {"$in": [1, {"$exist": True}]}}}, "/body/a/$in/1",
             "$exist inside the value of $in: an operand is plain data"),
            ({"headers": "push"}, "/headers", "headers takes an object of names"),
            ({"headers": {"$eq": "x"}}, "/headers/$eq",
             "$eq needs a header: {'headers': {<name>: {'$eq': …}}}"),
            ({"headers": {"X-Count": 5}}, "/headers/X-Count",
             'header values are text: $eq needs a string here: write "5"'),
            ({"headers": {"x-a": {"$gt": 5}}}, "/headers/x-a/$gt",
             "header values are text: $gt needs a string"),
            ({"headers": {"x-a": ["a", "b"]}}, "/headers/x-a",
             "header values are text: $eq needs a string here"),
            ({"headers": {"x-a": {"b": "c"}}}, "/headers/x-a/b",
             'header values are text, with no fields inside: use an operator such as {"$eq": "…"} '
             'or {"$startsWith": "…"}'),
            ({"headers": {"X-A": "1", "x-a": "2"}}, "/headers/x-a",
             "the header 'x-a' is named twice (names ignore case)"),
            ({"headers": {"$or": [{}]}}, "/headers/$or/0",
             "headers conditions are a non-empty object of names"),
            ({"query": {"page": 2}}, "/query/page",
             'query parameter values are text: $eq needs a string here: write "2"'),
            ({"query": {"tag": {"$in": [["a"]]}}}, "/query/tag/$in/0",
             "query parameter values are text: $in needs a string here"),
            ({"query": {"tag": {"$contains": 1}}}, "/query/tag/$contains",
             'query parameter values are text: $contains needs a string here: write "1"'),
            ({"body": {"a": float("nan")}}, "/body/a", "numbers must be finite"),
            ({"body": {"a": (1, 2)}}, "/body/a", "not a JSON value: tuple"),
            ({"body": {1: 2}}, "/body", "object keys must be strings"),
        ],
    )  # fmt: skip
    def test_refused_with_its_pointer(self, spec: Any, pointer: str, message: str) -> None:
        error = refusal(spec)
        assert (error.pointer, error.message) == (pointer, message)

    def test_a_query_parameter_may_equal_a_list_of_strings(self) -> None:
        compile_filter({"query": {"tag": ["a", "b"], "x": {"$neq": ["c"]}}})


class TestLimits:
    def test_depth_up_to_the_limit_is_accepted(self) -> None:
        assert compile_filter(nested(MAX_DEPTH)) is not None

    def test_one_level_more_is_refused_where_it_begins(self) -> None:
        error = refusal(nested(MAX_DEPTH + 1))
        assert error.pointer == "/body" + "/a" * (MAX_DEPTH - 1)
        assert error.message == f"nested deeper than {MAX_DEPTH} levels"

    def test_dotted_segments_count_as_levels(self) -> None:
        key = ".".join(["a"] * (MAX_DEPTH - 2))
        assert compile_filter({"body": {key: 1}}) is not None
        assert (
            refusal({"body": {key + ".a": 1}}).message == f"nested deeper than {MAX_DEPTH} levels"
        )

    def test_operands_count_as_levels(self) -> None:
        operand: Any = 1
        for _ in range(MAX_DEPTH):
            operand = [operand]
        assert (
            refusal({"body": {"$eq": operand}}).message == f"nested deeper than {MAX_DEPTH} levels"
        )

    def test_a_deep_specification_is_refused_without_recursion(self) -> None:
        spec: Any = 1
        for _ in range(100_000):
            spec = {"a": spec}
        assert refusal({"body": spec}).message == f"nested deeper than {MAX_DEPTH} levels"

    def test_values_up_to_the_limit_are_accepted(self) -> None:
        # the whole, the body's object, the object of "a" and the list: 4 beside the items
        spec = {"body": {"a": {"$in": list(range(MAX_VALUES - 4))}}}
        assert compile_filter(spec) is not None

    def test_one_value_more_is_refused(self) -> None:
        error = refusal({"body": {"a": {"$in": list(range(MAX_VALUES - 3))}}})
        assert (error.pointer, error.message) == (
            "",
            f"the filter is too large: more than {MAX_VALUES} values",
        )

    def test_long_strings_are_refused(self) -> None:
        assert compile_filter({"body": {"a": "x" * MAX_STRING}}) is not None
        error = refusal({"body": {"a": {"$contains": "x" * (MAX_STRING + 1)}}})
        assert (error.pointer, error.message) == (
            "/body/a/$contains",
            f"a string longer than {MAX_STRING} characters",
        )
        assert refusal({"body": {"k" * (MAX_STRING + 1): 1}}).pointer == "/body/" + "k" * (
            MAX_STRING + 1
        )


class TestFilterError:
    def test_detail_for_a_422(self) -> None:
        error = refusal({"body": {"data.amount": {"$gtx": 1}}})
        assert error.to_detail() == {
            "loc": ["body", "filter", "body", "data.amount", "$gtx"],
            "msg": "unknown operator $gtx (did you mean $gt?)",
            "type": "filter_invalid",
            "pointer": "/body/data.amount/$gtx",
        }
        assert error.to_detail(("body", "route", "filter"))["loc"][:3] == [
            "body",
            "route",
            "filter",
        ]

    def test_pointer_segments_are_unescaped_in_loc(self) -> None:
        error = refusal({"body": {"a/b~c": {"$bad": 1}}})
        assert error.pointer == "/body/a~1b~0c/$bad"
        assert error.to_detail()["loc"] == ["body", "filter", "body", "a/b~c", "$bad"]

    def test_rendered_as_a_422(self) -> None:
        error = refusal({"body": {"a": {"$in": 1}}})
        assert error.status_code == 422
        assert error.body() == {
            "error": "Invalid request",
            "message": "filter /body/a/$in: $in needs a list of values",
            "detail": [error.to_detail()],
        }

    def test_the_whole_specification_is_named(self) -> None:
        assert (
            str(refusal("x")) == "filter (whole): a filter is an object with body, headers or query"
        )


class TestCompiledOnce:
    def test_a_compiled_filter_is_reused(self) -> None:
        compiled = compile_filter({"body": {"n": {"$gte": 10}}})
        assert compiled is not None
        verdicts = [compiled.evaluate(Subject({"n": n})).matched for n in (9, 10, 11)]
        assert verdicts == [False, True, True]

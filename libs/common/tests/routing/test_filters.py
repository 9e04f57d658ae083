"""The filter semantics as a table (every operator against every kind of value), the peers'
pitfalls, paths, arrays, headers, query, text bodies and the reasons an owner reads."""

from __future__ import annotations

from typing import Any

import pytest

from hookbay_common.routing.filters import MATCHED, Filter, Subject, Verdict, compile_filter
from hookbay_common.routing.values import MISSING


def create_filter(spec: Any) -> Filter:
    compiled = compile_filter(spec)
    assert compiled is not None
    return compiled


def body_verdict(condition: Any, body: Any) -> Verdict:
    return create_filter({"body": condition}).evaluate(Subject(body))


def field_matches(condition: Any, value: Any) -> bool:
    """``condition`` on the body's field ``v`` holding ``value`` (absent for ``MISSING``)."""
    body = {} if value is MISSING else {"v": value}
    return body_verdict({"v": condition}, body).matched


# The values every condition is tried against, in the table's column order.
KINDS: dict[str, Any] = {
    "string": "abc",
    "int": 5,
    "float": 5.0,
    "bool": True,
    "null": None,
    "array": ["abc", 5],
    "object": {"k": "abc"},
    "missing": MISSING,
}

# ✓ matches, · does not; columns: string int float bool null array object missing
TABLE: list[tuple[str, Any, str]] = [
    ("literal string", "abc", "✓ · · · · ✓ · ·"),
    ("literal number", 5, "· ✓ ✓ · · ✓ · ·"),
    ("literal float", 5.0, "· ✓ ✓ · · ✓ · ·"),
    ("literal true", True, "· · · ✓ · · · ·"),
    ("literal null", None, "· · · · ✓ · · ·"),
    ("literal array", ["abc", 5], "· · · · · ✓ · ·"),
    ("$eq string", {"$eq": "abc"}, "✓ · · · · ✓ · ·"),
    ("$eq number as string", {"$eq": "5"}, "· · · · · · · ·"),
    ("$eq 1 is not true", {"$eq": 1}, "· · · · · · · ·"),
    ("$eq object", {"$eq": {"k": "abc"}}, "· · · · · · ✓ ·"),
    ("$eq null", {"$eq": None}, "· · · · ✓ · · ·"),
    ("$neq string", {"$neq": "abc"}, "· ✓ ✓ ✓ ✓ · ✓ ·"),
    ("$neq null", {"$neq": None}, "✓ ✓ ✓ ✓ · ✓ ✓ ·"),
    ("$in mixed", {"$in": ["abc", 5]}, "✓ ✓ ✓ · · ✓ · ·"),
    ("$in true null", {"$in": [True, None]}, "· · · ✓ ✓ · · ·"),
    ("$in empty", {"$in": []}, "· · · · · · · ·"),
    ("$nin mixed", {"$nin": ["abc", 5]}, "· · · ✓ ✓ · ✓ ·"),
    ("$gt number", {"$gt": 4}, "· ✓ ✓ · · · · ·"),
    ("$gte number", {"$gte": 5}, "· ✓ ✓ · · · · ·"),
    ("$lt number", {"$lt": 6}, "· ✓ ✓ · · · · ·"),
    ("$lte float", {"$lte": 4.5}, "· · · · · · · ·"),
    ("$gt string", {"$gt": "abb"}, "✓ · · · · · · ·"),
    ("$lt string", {"$lt": "abd"}, "✓ · · · · · · ·"),
    ("$lte string equal", {"$lte": "abc"}, "✓ · · · · · · ·"),
    ("$exist true", {"$exist": True}, "✓ ✓ ✓ ✓ ✓ ✓ ✓ ·"),
    ("$exist false", {"$exist": False}, "· · · · · · · ✓"),
    ("$startsWith", {"$startsWith": "ab"}, "✓ · · · · · · ·"),
    ("$startsWith any of", {"$startsWith": ["x", "a"]}, "✓ · · · · · · ·"),
    ("$endsWith", {"$endsWith": "bc"}, "✓ · · · · · · ·"),
    ("$contains substring", {"$contains": "b"}, "✓ · · · · · · ·"),
    ("$contains whole", {"$contains": "abc"}, "✓ · · · · ✓ · ·"),
    ("$contains number", {"$contains": 5}, "· · · · · ✓ · ·"),
    ("$contains a key", {"$contains": "k"}, "· · · · · · · ·"),
    ("nested object", {"k": "abc"}, "· · · · · · ✓ ·"),
    ("nested $exist false", {"k": {"$exist": False}}, "✓ ✓ ✓ ✓ ✓ ✓ · ✓"),
    ("$not literal", {"$not": {"$eq": "abc"}}, "· ✓ ✓ ✓ ✓ · ✓ ✓"),
    ("$not $exist true", {"$not": {"$exist": True}}, "· · · · · · · ✓"),
    ("$or", {"$or": [{"$eq": 5}, {"$startsWith": "a"}]}, "✓ ✓ ✓ · · ✓ · ·"),
    ("$and", {"$and": [{"$gt": 1}, {"$lt": 10}]}, "· ✓ ✓ · · · · ·"),
    ("two operators", {"$gte": 5, "$lt": 5.5}, "· ✓ ✓ · · · · ·"),
]

CELLS = [
    pytest.param(condition, KINDS[kind], expected == "✓", id=f"{name}-{kind}")
    for name, condition, row in TABLE
    for kind, expected in zip(KINDS, row.split(), strict=True)
]


class TestSemanticsTable:
    @pytest.mark.parametrize(("condition", "value", "expected"), CELLS)
    def test_cell(self, condition: Any, value: Any, expected: bool) -> None:
        assert field_matches(condition, value) is expected


class TestConvoyPitfalls:
    def test_a_missing_key_is_not_ignored_when_another_matches(self) -> None:
        verdict = body_verdict({"a": 1, "b": 2}, {"a": 1})
        assert verdict == Verdict(False, "body.b: missing (filter /body/b)", "/body/b")

    def test_null_matches_null(self) -> None:
        assert body_verdict({"a": None}, {"a": None}) == MATCHED
        assert not body_verdict({"a": None}, {}).matched

    def test_lt_on_a_string_is_false(self) -> None:
        assert not body_verdict({"a": {"$lt": 3}}, {"a": "abc"}).matched
        assert not body_verdict({"a": {"$gte": 9}}, {"a": "10"}).matched

    def test_exist_false_on_an_absent_key_matches(self) -> None:
        assert body_verdict({"b": {"$exist": False}}, {"a": 1}).matched


class TestStrictness:
    @pytest.mark.parametrize(
        ("condition", "value"),
        [("5", 5), (5, "5"), ("true", True), (1, True), (True, 1), (0, False), (None, 0),
         (None, ""), ("", None), ([1], 1), ({"$gt": 0}, True), ({"$lt": "b"}, 1)],
    )  # fmt: skip
    def test_no_conversion_between_kinds(self, condition: Any, value: Any) -> None:
        assert not field_matches(condition, value)

    def test_numbers_compare_by_value(self) -> None:
        assert field_matches(1, 1.0)
        assert field_matches({"$in": [2.0]}, 2)

    def test_strings_order_by_code_point(self) -> None:
        assert not field_matches({"$gt": "9"}, "10")
        assert field_matches({"$gte": "2026-01-01T00:00:00Z"}, "2026-03-05T10:00:00Z")

    def test_eq_on_objects_is_deep_and_exact(self) -> None:
        value = {"a": 1, "b": [1, {"c": None}]}
        assert field_matches({"$eq": {"b": [1, {"c": None}], "a": 1}}, value)
        assert not field_matches({"$eq": {"a": 1}}, value)
        assert not field_matches({"$eq": {"a": True, "b": [1, {"c": None}]}}, value)

    def test_nested_objects_match_partially(self) -> None:
        assert field_matches({"a": 1}, {"a": 1, "b": 2})

    def test_eq_on_arrays_keeps_order(self) -> None:
        assert not field_matches([5, "abc"], ["abc", 5])

    def test_neq_and_nin_on_a_missing_key_do_not_match(self) -> None:
        assert not field_matches({"$neq": "a"}, MISSING)
        assert not field_matches({"$nin": ["a"]}, MISSING)

    def test_not_on_a_missing_key_negates(self) -> None:
        assert field_matches({"$not": {"$eq": 1}}, MISSING)
        assert field_matches({"$or": [{"$exist": False}, {"$neq": "a"}]}, MISSING)


class TestArrays:
    def test_a_literal_matches_an_element(self) -> None:
        assert body_verdict({"tags": "x"}, {"tags": ["x", "y"]}).matched

    def test_an_array_literal_is_the_whole_array_not_a_subset(self) -> None:
        assert not body_verdict({"tags": ["x", "y"]}, {"tags": ["x", "y", "z"]}).matched
        assert body_verdict({"tags": ["x", "y"]}, {"tags": ["x", "y"]}).matched
        assert body_verdict({"tags": ["x", "y"]}, {"tags": [["x", "y"], "z"]}).matched

    def test_an_object_holds_for_some_element(self) -> None:
        body = {"items": [{"id": 1, "qty": 3}, {"id": 2, "qty": 1}]}
        assert body_verdict({"items": {"id": 2}}, body).matched
        assert body_verdict({"items.id": 2}, body).matched
        assert not body_verdict({"items": {"id": 3}}, body).matched

    def test_one_object_needs_one_element_two_dotted_keys_do_not(self) -> None:
        body = {"items": [{"id": 1, "qty": 3}, {"id": 2, "qty": 1}]}
        assert not body_verdict({"items": {"id": 2, "qty": 3}}, body).matched
        assert body_verdict({"items.id": 2, "items.qty": 3}, body).matched

    def test_ordering_and_string_operators_do_not_look_into_arrays(self) -> None:
        assert not field_matches({"$gt": 1}, [5, 6])
        assert not field_matches({"$startsWith": "a"}, ["abc"])

    def test_elements_are_looked_into_one_level_only(self) -> None:
        assert not field_matches("x", [["x"]])
        assert not field_matches({"$contains": "x"}, [["x"]])
        assert not field_matches({"k": 1}, [[{"k": 1}]])

    def test_neq_fails_when_an_element_is_equal(self) -> None:
        assert not field_matches({"$neq": "x"}, ["x", "y"])
        assert field_matches({"$neq": "x"}, ["y"])

    def test_an_empty_array_has_no_element_to_match(self) -> None:
        verdict = body_verdict({"items": {"id": 1}}, {"items": []})
        assert (
            verdict.reason == "body.items: an empty array, no element to match (filter /body/items)"
        )

    def test_contains_objects_by_deep_equality(self) -> None:
        assert field_matches({"$contains": {"id": 1}}, [{"id": 1}])
        assert not field_matches({"$contains": {"id": 1}}, [{"id": 1, "x": 2}])


class TestPaths:
    def test_a_dotted_key_is_a_nested_object(self) -> None:
        body = {"data": {"object": {"id": "in_1"}}}
        assert body_verdict({"data.object.id": "in_1"}, body).matched
        assert body_verdict({"data": {"object.id": {"$startsWith": "in_"}}}, body).matched

    def test_a_path_into_a_scalar_is_missing(self) -> None:
        assert body_verdict({"a.b": {"$exist": False}}, {"a": "text"}).matched
        assert not body_verdict({"a.b": None}, {"a": None}).matched

    def test_a_missing_parent_is_reported_at_the_leaf(self) -> None:
        verdict = body_verdict({"data.object.id": "x"}, {"type": "ping"})
        assert verdict.reason == "body.data.object.id: missing (filter /body/data.object.id)"

    def test_logical_operators_beside_fields(self) -> None:
        condition = {"type": "invoice.paid", "$or": [{"amount": {"$gte": 100}}, {"vip": True}]}
        assert body_verdict(condition, {"type": "invoice.paid", "amount": 5, "vip": True}).matched
        assert not body_verdict(condition, {"type": "invoice.paid", "amount": 5}).matched

    def test_a_field_named_like_an_index_is_a_key(self) -> None:
        assert not body_verdict({"items.0": "a"}, {"items": ["a"]}).matched
        assert body_verdict({"items.0": "a"}, {"items": {"0": "a"}}).matched


class TestScopes:
    def test_headers_names_ignore_case_on_both_sides(self) -> None:
        subject = Subject.from_request(b"{}", "application/json", {"X-GitHub-Event": "push"}, {})
        assert create_filter({"headers": {"X-GITHUB-EVENT": "push"}}).evaluate(subject).matched
        verdict = create_filter({"headers": {"x-github-event": "issues"}}).evaluate(subject)
        assert verdict.reason == (
            'headers.x-github-event: "push" is not $eq "issues" (filter /headers/x-github-event)'
        )

    def test_header_names_differing_in_case_are_one_header(self) -> None:
        subject = Subject.from_request(b"", None, {"X-A": "1", "x-a": "2"}, {})
        assert subject.headers == {"x-a": "1, 2"}

    def test_headers_with_a_dot_in_the_name_are_not_paths(self) -> None:
        subject = Subject({}, headers={"x.a": "1"})
        assert create_filter({"headers": {"x.a": "1"}}).evaluate(subject).matched

    def test_query_repeated_parameter_is_a_list(self) -> None:
        subject = Subject.from_request(b"", None, {}, {"tag": ["a", "b"], "page": ["2"]})
        assert subject.query == {"tag": ["a", "b"], "page": "2"}
        assert create_filter({"query": {"tag": "b", "page": "2"}}).evaluate(subject).matched
        assert create_filter({"query": {"tag": ["a", "b"]}}).evaluate(subject).matched
        assert not create_filter({"query": {"page": {"$in": ["3"]}}}).evaluate(subject).matched

    def test_query_names_are_case_sensitive(self) -> None:
        subject = Subject({}, query={"Page": "2"})
        assert not create_filter({"query": {"page": "2"}}).evaluate(subject).matched

    def test_every_scope_must_hold(self) -> None:
        spec = {"body": {"type": "push"}, "headers": {"x-a": "1"}, "query": {"q": "1"}}
        subject = Subject({"type": "push"}, headers={"x-a": "1"}, query={"q": "2"})
        assert create_filter(spec).evaluate(subject).pointer == "/query/q"

    def test_logical_operators_over_names(self) -> None:
        spec = {"headers": {"$or": [{"x-github-event": "push"}, {"x-github-event": "ping"}]}}
        assert create_filter(spec).evaluate(Subject({}, headers={"x-github-event": "ping"})).matched
        assert not create_filter(spec).evaluate(Subject({}, headers={})).matched

    def test_no_filter_and_empty_filters_match_everything(self) -> None:
        assert compile_filter(None) is None
        assert create_filter({}).evaluate(Subject("x")) == MATCHED
        assert create_filter({"body": {}, "headers": {}}).evaluate(Subject("x")) == MATCHED

    def test_a_null_part_has_no_condition(self) -> None:
        spec = {"body": {"a": 1}, "headers": None, "query": None}
        assert create_filter(spec).evaluate(Subject({"a": 1})) == MATCHED
        assert create_filter({"body": None}).evaluate(Subject(None)) == MATCHED
        assert not create_filter({"body": {"$eq": None}}).evaluate(Subject("null")).matched


class TestTextBody:
    def text_subject(self, body: bytes, content_type: str | None = "text/plain") -> Subject:
        return Subject.from_request(body, content_type, {}, {})

    def test_string_operators_see_the_raw_text(self) -> None:
        subject = self.text_subject(b"event=charge.failed&id=3")
        assert not subject.body_is_json
        for condition in [
            "event=charge.failed&id=3",
            {"$startsWith": "event=charge."},
            {"$endsWith": "id=3"},
            {"$contains": "charge.failed"},
            {"$exist": True},
        ]:
            assert create_filter({"body": condition}).evaluate(subject).matched, condition

    def test_a_path_into_text_is_missing(self) -> None:
        subject = self.text_subject(b"hello")
        verdict = create_filter({"body": {"type": "x"}}).evaluate(subject)
        assert verdict.reason == "body.type: missing (filter /body/type)"
        assert create_filter({"body": {"type": {"$exist": False}}}).evaluate(subject).matched

    def test_text_that_looks_like_a_number_stays_text(self) -> None:
        subject = self.text_subject(b"123")
        assert subject.body == "123"
        assert not create_filter({"body": 123}).evaluate(subject).matched

    def test_a_json_object_is_json_whatever_the_content_type(self) -> None:
        subject = self.text_subject(b' {"Type": "Notification"}', "text/plain; charset=UTF-8")
        assert subject.body_is_json
        assert create_filter({"body": {"Type": "Notification"}}).evaluate(subject).matched
        assert self.text_subject(b"[1]", None).body == [1]

    def test_a_json_scalar_is_json_with_a_json_content_type(self) -> None:
        assert self.text_subject(b"42", "application/json").body == 42
        assert self.text_subject(b'"hi"', "application/vnd.api+json; charset=utf-8").body == "hi"

    def test_broken_json_is_text(self) -> None:
        subject = self.text_subject(b'{"a": 1', "application/json")
        assert subject.body == '{"a": 1'
        assert self.text_subject(b'{"a": NaN}', "application/json").body == '{"a": NaN}'

    def test_invalid_utf8_is_replaced(self) -> None:
        subject = self.text_subject(b'{"a": "\xff"}', "application/json")
        assert subject.body == '{"a": "\ufffd"}'
        assert not subject.body_is_json

    def test_an_empty_body_is_the_empty_string(self) -> None:
        subject = self.text_subject(b"", "application/json")
        assert create_filter({"body": ""}).evaluate(subject).matched


class TestPathologicalInputs:
    def test_a_body_nested_beyond_the_parser_is_text(self) -> None:
        body = b"[" * 100_000 + b"]" * 100_000
        subject = Subject.from_request(body, "application/json", {}, {})
        assert not subject.body_is_json
        assert create_filter({"body": {"$startsWith": "[[["}}).evaluate(subject).matched

    def test_evaluation_does_not_follow_a_deep_value(self) -> None:
        deep: Any = 1
        for _ in range(100_000):
            deep = [deep]
        for condition in [{"$eq": [[1]]}, {"$contains": [1]}, {"k": 1}, {"$in": [[1]]}, "x"]:
            verdict = body_verdict({"a": condition}, {"a": deep})
            assert not verdict.matched
            assert verdict.reason is not None
            assert len(verdict.reason) < 300

    def test_a_long_array_is_scanned_without_recursion(self) -> None:
        items = [{"id": i} for i in range(100_000)]
        assert body_verdict({"items": {"id": 99_999}}, {"items": items}).matched


class TestReasons:
    @pytest.mark.parametrize(
        ("condition", "body", "reason"),
        [
            ({"type": "invoice.paid"}, {"type": "charge.failed"},
             'body.type: "charge.failed" is not $eq "invoice.paid" (filter /body/type)'),
            ({"amount": {"$gt": 10}}, {},
             "body.amount: missing (filter /body/amount/$gt)"),
            ({"amount": {"$gt": 10}}, {"amount": "50"},
             'body.amount: "50" is not $gt 10; a string never equals or compares with a number'
             " (filter /body/amount/$gt)"),
            ({"a": {"$exist": False}}, {"a": None},
             "body.a: present (null), not $exist false (filter /body/a/$exist)"),
            ({"a": {"$not": {"$in": [1, 2]}}}, {"a": 2},
             'body.a: 2 matches $not {"$in": [1, 2]} (filter /body/a/$not)'),
            ({"$or": [{"a": 1}, {"b": 2}]}, {"a": 2},
             "body: no $or branch holds (body.a: 2 is not $eq 1; body.b: missing)"
             " (filter /body/$or)"),
            ({"items": {"id": 2}}, {"items": [{"id": 1}]},
             "body.items: no element matches (the first: body.items.id: 1 is not $eq 2)"
             " (filter /body/items)"),
            ({"tags": {"$contains": "x"}}, {"tags": ["a", "b", "c", "d"]},
             'body.tags: ["a", "b", "c", … 1 more] is not $contains "x" (filter /body/tags/$contains)'),
            ({"a": {"$startsWith": "in"}}, {"a": "x" * 100},
             f'body.a: "{"x" * 60}…" is not $startsWith "in" (filter /body/a/$startsWith)'),
            ({"a/b~c": 1}, {}, "body.a/b~c: missing (filter /body/a~1b~0c)"),
        ],
    )  # fmt: skip
    def test_reason(self, condition: Any, body: Any, reason: str) -> None:
        verdict = body_verdict(condition, body)
        assert verdict.reason == reason
        assert verdict.pointer is not None
        assert reason.endswith(f"(filter {verdict.pointer})")

    def test_the_first_failing_condition_in_written_order(self) -> None:
        verdict = body_verdict({"b": 1, "a": 1}, {})
        assert verdict.pointer == "/body/b"

    def test_a_match_has_no_reason(self) -> None:
        assert body_verdict({"a": 1}, {"a": 1}) == Verdict(True, None, None)


class TestExamples:
    def test_stripe_invoice_events(self) -> None:
        spec = {"body": {"type": {"$startsWith": "invoice."}, "livemode": True}}
        stripe = create_filter(spec)
        paid = Subject.from_request(
            b'{"type": "invoice.paid", "livemode": true, "data": {"object": {"amount_paid": 900}}}',
            "application/json; charset=utf-8",
            {"Stripe-Signature": "t=1,v1=ab"},
            {},
        )
        assert stripe.evaluate(paid).matched
        failed = Subject({"type": "charge.failed", "livemode": True})
        assert not stripe.evaluate(failed).matched

    def test_github_pushes_to_main(self) -> None:
        spec = {"headers": {"X-GitHub-Event": "push"}, "body": {"ref": "refs/heads/main"}}
        github = create_filter(spec)
        push = Subject({"ref": "refs/heads/main"}, headers={"x-github-event": "push"})
        assert github.evaluate(push).matched
        ping = Subject({"zen": "Keep it simple."}, headers={"x-github-event": "ping"})
        assert github.evaluate(ping).pointer == "/headers/X-GitHub-Event"

"""The deduplication rule: what it accepts and refuses, and the key it reads of an event
(every preset, missing/empty/null/nested values, header case, repeated query parameters)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hookbay_common.db.webhooks import routes_from_document, routes_to_document
from hookbay_common.models import Route
from hookbay_common.routing.dedupe import (
    MAX_FIELDS,
    WINDOW_MAX,
    DedupePreset,
    DedupeRule,
    dedupe_key,
)
from hookbay_common.routing.subject import Subject
from hookbay_common.routing.values import strict_equal
from tests.support.factories import create_route

REPRODUCIBLE = settings(derandomize=True, database=None, max_examples=200, deadline=None)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


def create_rule(**fields: Any) -> DedupeRule:
    return DedupeRule.model_validate({"window_s": 60, **fields})


def refusal(spec: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    with pytest.raises(ValidationError) as caught:
        DedupeRule.model_validate(spec)
    return [(tuple(e["loc"]), e["msg"]) for e in caught.value.errors()]


def create_subject(
    body: object = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str | list[str]] | None = None,
    content_type: str | None = "application/json",
) -> Subject:
    """A subject as the router builds one from a request."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Subject.from_request(raw, content_type, headers or {}, query or {})


def key_of(fields: list[str], subject: Subject) -> str | None:
    return dedupe_key(create_rule(fields=fields), subject)


def body_key(value: object) -> str | None:
    """The key of ``body.id`` holding ``value``."""
    return key_of(["body.id"], create_subject({"id": value}))


class TestDedupeRule:
    def test_a_preset(self) -> None:
        rule = DedupeRule.model_validate({"window_s": 3600, "preset": "github"})
        assert rule.preset is DedupePreset.GITHUB
        assert rule.fields is None
        assert rule.paths == ("headers.x-github-delivery",)

    @pytest.mark.parametrize(
        ("preset", "paths"),
        [
            ("github", ("headers.x-github-delivery",)),
            ("stripe", ("body.id",)),
            ("standard-webhooks", ("headers.webhook-id",)),
            ("shopify", ("headers.x-shopify-event-id",)),
        ],
    )
    def test_every_preset_names_its_provider_s_field(
        self, preset: str, paths: tuple[str, ...]
    ) -> None:
        assert create_rule(preset=preset).paths == paths

    def test_fields_in_the_order_given_with_header_names_lowercased(self) -> None:
        rule = create_rule(fields=["query.Delivery", "headers.X-Request-Id", "body.data.Id"])
        assert rule.fields == ("query.Delivery", "headers.x-request-id", "body.data.Id")
        assert rule.paths == rule.fields

    @pytest.mark.parametrize("window", [1, 60, WINDOW_MAX])
    def test_windows_from_one_second_to_seven_days(self, window: int) -> None:
        assert create_rule(window_s=window, preset="stripe").window_s == window

    @pytest.mark.parametrize("window", [0, -1, WINDOW_MAX + 1])
    def test_a_window_out_of_range_is_refused(self, window: int) -> None:
        [(loc, _)] = refusal({"window_s": window, "preset": "stripe"})
        assert loc == ("window_s",)

    @pytest.mark.parametrize("window", ["60", 60.0, 1.5, True, None])
    def test_a_window_that_is_not_a_whole_number_is_refused(self, window: object) -> None:
        [(loc, msg)] = refusal({"window_s": window, "preset": "stripe"})
        assert loc == ("window_s",)
        assert "integer" in msg

    def test_a_missing_window_is_refused(self) -> None:
        assert refusal({"preset": "stripe"}) == [(("window_s",), "Field required")]

    def test_an_unknown_preset_is_refused_naming_the_presets(self) -> None:
        [(loc, msg)] = refusal({"window_s": 60, "preset": "gitlab"})
        assert loc == ("preset",)
        for name in ("github", "stripe", "standard-webhooks", "shopify"):
            assert name in msg

    def test_a_preset_spelt_in_capitals_is_refused(self) -> None:
        [(loc, _)] = refusal({"window_s": 60, "preset": "GitHub"})
        assert loc == ("preset",)

    def test_both_preset_and_fields_are_refused(self) -> None:
        [(loc, msg)] = refusal({"window_s": 60, "preset": "github", "fields": ["body.id"]})
        assert loc == ()
        assert "exactly one of preset or fields (both given)" in msg

    @pytest.mark.parametrize(
        "spec", [{"window_s": 60}, {"window_s": 60, "preset": None, "fields": None}]
    )
    def test_neither_preset_nor_fields_is_refused(self, spec: dict[str, Any]) -> None:
        [(loc, msg)] = refusal(spec)
        assert loc == ()
        assert "exactly one of preset or fields (neither given)" in msg

    def test_inside_a_route_the_error_names_dedupe(self) -> None:
        with pytest.raises(ValidationError) as caught:
            create_route(dedupe={"window_s": 60})
        [error] = caught.value.errors()
        assert error["loc"] == ("dedupe",)

    def test_an_unknown_key_is_refused(self) -> None:
        [(loc, _)] = refusal({"window_s": 60, "preset": "github", "include_fields": ["x"]})
        assert loc == ("include_fields",)

    def test_no_fields_are_refused(self) -> None:
        [(loc, msg)] = refusal({"window_s": 60, "fields": []})
        assert loc == ("fields",)
        assert msg == "Value error, 1 to 5 fields make a key, not 0"

    def test_more_than_five_fields_are_refused_as_one_error(self) -> None:
        fields = [f"body.f{i}" for i in range(MAX_FIELDS + 1)]
        assert refusal({"window_s": 60, "fields": fields}) == [
            (("fields",), "Value error, 1 to 5 fields make a key, not 6")
        ]
        assert create_rule(fields=fields[:MAX_FIELDS]).paths == tuple(fields[:MAX_FIELDS])

    def test_fields_as_one_string_are_refused(self) -> None:
        [(loc, _)] = refusal({"window_s": 60, "fields": "body.id"})
        assert loc == ("fields",)

    @pytest.mark.parametrize(
        ("path", "says"),
        [
            ("id", "must start with 'body.', 'headers.' or 'query.'"),
            ("body", "must start with 'body.', 'headers.' or 'query.'"),
            ("path.x", "must start with 'body.', 'headers.' or 'query.'"),
            ("Body.id", "must start with 'body.', 'headers.' or 'query.'"),
            ("body.", "names nothing after 'body'"),
            ("headers.", "names nothing after 'headers'"),
            ("query.", "names nothing after 'query'"),
            ("body.a..b", "has an empty segment"),
            ("body.a.", "has an empty segment"),
            ("body." + ".".join("a" * 17), "more than 16 levels deep"),
            ("body." + "a" * 260, "longer than 256 characters"),
            ("headers.x request", "is not an HTTP header name"),
            ("headers.x:y", "is not an HTTP header name"),
            ("query.a\nb", "holds a control character"),
        ],
    )
    def test_a_bad_path_is_refused_naming_its_place(self, path: str, says: str) -> None:
        [(loc, msg)] = refusal({"window_s": 60, "fields": ["body.id", path]})
        assert loc == ("fields", 1)
        assert says in msg

    @pytest.mark.parametrize("path", [1, None, ["body.id"]])
    def test_a_path_that_is_not_a_string_is_refused(self, path: object) -> None:
        [(loc, _)] = refusal({"window_s": 60, "fields": [path]})
        assert loc == ("fields", 0)

    def test_one_header_named_twice_in_two_cases_is_refused(self) -> None:
        [(loc, msg)] = refusal({"window_s": 60, "fields": ["headers.X-Id", "headers.x-id"]})
        assert loc == ("fields",)
        assert "'headers.x-id' is named twice" in msg

    def test_dotted_header_and_query_names_are_one_name(self) -> None:
        rule = create_rule(fields=["headers.x.delivery", "query.a.b"])
        subject = create_subject({}, headers={"x.delivery": "d1"}, query={"a.b": "q1"})
        assert dedupe_key(rule, subject) is not None

    def test_a_rule_is_immutable(self) -> None:
        rule = create_rule(preset="github")
        with pytest.raises(ValidationError):
            rule.window_s = 5


class TestRouteModel:
    def test_a_route_without_rules_stores_and_publishes_without_them(self) -> None:
        """So a version of hookbay that knows neither field still reads the route."""
        route = create_route()
        assert route.dedupe is None
        assert route.delay_s is None
        assert "dedupe" not in route.model_dump(mode="json")
        assert "delay_s" not in route.model_dump(mode="json")
        [document] = routes_to_document([route])
        assert "dedupe" not in document
        assert "delay_s" not in document

    def test_rules_survive_the_store_and_the_change_log(self) -> None:
        route = create_route(dedupe={"window_s": 600, "fields": ["headers.X-Id"]}, delay_s=30)
        assert routes_from_document(routes_to_document([route])) == [route]
        assert Route.model_validate(route.model_dump(mode="json")) == route
        assert Route.model_validate_json(route.model_dump_json()) == route
        assert route.dedupe is not None
        assert route.dedupe.fields == ("headers.x-id",)

    @pytest.mark.parametrize("delay", [0, 1, 86_400])
    def test_delays_from_zero_to_a_day(self, delay: int) -> None:
        assert create_route(delay_s=delay).delay_s == delay

    @pytest.mark.parametrize("delay", [-1, 86_401])
    def test_a_delay_out_of_range_is_refused(self, delay: int) -> None:
        with pytest.raises(ValidationError) as caught:
            create_route(delay_s=delay)
        assert [e["loc"] for e in caught.value.errors()] == [("delay_s",)]


class TestPresetKeys:
    @pytest.mark.parametrize(
        ("preset", "subject"),
        [
            ("github", create_subject({"action": "opened"}, headers={"X-GitHub-Delivery": "d1"})),
            ("stripe", create_subject({"id": "evt_1", "type": "charge.succeeded"})),
            ("standard-webhooks", create_subject({}, headers={"webhook-id": "msg_1"})),
            ("shopify", create_subject({}, headers={"X-Shopify-Event-Id": "e1"})),
        ],
    )
    def test_every_preset_keys_its_provider_s_deliveries(
        self, preset: str, subject: Subject
    ) -> None:
        rule = create_rule(preset=preset)
        key = dedupe_key(rule, subject)
        assert key is not None
        assert key == dedupe_key(create_rule(fields=list(rule.paths)), subject)

    @pytest.mark.parametrize("preset", ["github", "stripe", "standard-webhooks", "shopify"])
    def test_a_preset_s_field_missing_gives_no_key(self, preset: str) -> None:
        assert dedupe_key(create_rule(preset=preset), create_subject({"type": "x"})) is None

    def test_a_retry_of_the_same_delivery_has_the_same_key(self) -> None:
        rule = create_rule(preset="github")
        first = create_subject({"a": 1}, headers={"X-GitHub-Delivery": "d1", "X-Try": "1"})
        again = create_subject({"a": 1}, headers={"x-github-delivery": "d1", "X-Try": "2"})
        other = create_subject({"a": 1}, headers={"X-GitHub-Delivery": "d2"})
        assert dedupe_key(rule, first) == dedupe_key(rule, again) != dedupe_key(rule, other)


class TestKeys:
    def test_a_key_is_64_hex_digits_of_sha256_over_canonical_json(self) -> None:
        key = key_of(["body.id", "headers.x-a"], create_subject({"id": 7}, {"X-A": "é"}))
        canonical = '[["body.id",7],["headers.x-a","\\u00e9"]]'
        assert key == hashlib.sha256(canonical.encode()).hexdigest()

    def test_a_long_value_makes_a_key_of_the_same_size(self) -> None:
        key = body_key("x" * 100_000)
        assert key is not None
        assert len(key) == 64

    def test_a_number_and_its_text_differ(self) -> None:
        assert body_key(1) != body_key("1")
        assert body_key(True) != body_key("true")
        assert body_key(True) != body_key(1)

    def test_numbers_are_keyed_by_value(self) -> None:
        assert body_key(1) == body_key(1.0)
        assert body_key(1.5) != body_key(1)
        assert body_key(2**70) != body_key(2**70 + 1)

    def test_field_order_is_the_rule_s(self) -> None:
        subject = create_subject({"a": "x", "b": "y"})
        assert key_of(["body.a", "body.b"], subject) != key_of(["body.b", "body.a"], subject)

    def test_values_are_not_concatenated(self) -> None:
        """``"ab" + "c"`` and ``"a" + "bc"`` would collide if the parts were joined as text."""
        one = key_of(["body.a", "body.b"], create_subject({"a": "ab", "b": "c"}))
        two = key_of(["body.a", "body.b"], create_subject({"a": "a", "b": "bc"}))
        assert one != two

    def test_two_fields_with_one_value_differ(self) -> None:
        subject = create_subject({"id": "x", "ref": "x"})
        assert key_of(["body.id"], subject) != key_of(["body.ref"], subject)

    def test_the_rest_of_the_event_does_not_matter(self) -> None:
        one = create_subject({"id": "evt_1", "attempt": 1}, headers={"date": "a"})
        two = create_subject({"id": "evt_1", "attempt": 2}, headers={"date": "b"})
        assert key_of(["body.id"], one) == key_of(["body.id"], two)

    def test_nested_body_fields(self) -> None:
        subject = create_subject({"data": {"object": {"id": "ch_1"}}})
        assert key_of(["body.data.object.id"], subject) == key_of(
            ["body.data.object.id"], create_subject({"data": {"object": {"id": "ch_1"}}, "x": 1})
        )
        assert key_of(["body.data.object.id"], subject) is not None
        assert key_of(["body.data.missing.id"], subject) is None

    def test_a_path_through_an_array_or_a_scalar_leads_nowhere(self) -> None:
        assert key_of(["body.items.0"], create_subject({"items": ["a"]})) is None
        assert key_of(["body.items.id"], create_subject({"items": [{"id": "a"}]})) is None
        assert key_of(["body.id.x"], create_subject({"id": "a"})) is None
        assert key_of(["body.id"], create_subject(["a"])) is None

    def test_header_names_ignore_case(self) -> None:
        subject = create_subject({}, headers={"X-Request-ID": "r1"})
        assert key_of(["headers.x-request-id"], subject) is not None
        assert key_of(["headers.X-REQUEST-ID"], subject) == key_of(
            ["headers.x-request-id"], subject
        )

    def test_header_values_are_case_sensitive(self) -> None:
        upper = key_of(["headers.x-id"], create_subject({}, headers={"x-id": "ABC"}))
        lower = key_of(["headers.x-id"], create_subject({}, headers={"x-id": "abc"}))
        assert upper != lower

    def test_a_header_and_a_query_parameter_of_one_name_differ(self) -> None:
        subject = create_subject({}, headers={"id": "1"}, query={"id": "1"})
        assert key_of(["headers.id"], subject) != key_of(["query.id"], subject)

    def test_a_query_parameter(self) -> None:
        subject = create_subject({}, query={"delivery": ["d1"]})  # as parse_qs gives it
        assert key_of(["query.delivery"], subject) == key_of(
            ["query.delivery"], create_subject({}, query={"delivery": "d1"})
        )
        assert key_of(["query.delivery"], subject) is not None

    def test_a_repeated_query_parameter_gives_no_key(self) -> None:
        """Several values name no one event: which one, and in which order, is the sender's."""
        subject = create_subject({}, query={"delivery": ["d1", "d2"]})
        assert key_of(["query.delivery"], subject) is None

    def test_query_parameter_names_are_case_sensitive(self) -> None:
        assert key_of(["query.Id"], create_subject({}, query={"id": "1"})) is None

    def test_a_text_body_has_no_fields(self) -> None:
        subject = create_subject(b"id=evt_1", headers={"x-id": "1"}, content_type="text/plain")
        assert key_of(["body.id"], subject) is None
        assert key_of(["headers.x-id"], subject) is not None

    def test_scalars_make_keys(self) -> None:
        for value in ("evt_1", " padded ", 0, -3, 2.5, False, True):
            assert body_key(value) is not None, value

    @pytest.mark.parametrize("value", [None, "", " ", "\t\n", {}, {"a": 1}, [], ["evt_1"], [1, 2]])
    def test_null_empty_and_structured_values_give_no_key(self, value: object) -> None:
        assert body_key(value) is None

    def test_a_missing_field_gives_no_key(self) -> None:
        assert key_of(["body.id"], create_subject({"other": 1})) is None
        assert key_of(["headers.x-id"], create_subject({})) is None
        assert key_of(["query.id"], create_subject({})) is None

    def test_an_empty_header_or_query_value_gives_no_key(self) -> None:
        assert key_of(["headers.x-id"], create_subject({}, headers={"x-id": ""})) is None
        assert key_of(["query.id"], create_subject({}, query={"id": [""]})) is None

    def test_one_field_of_several_missing_gives_no_key(self) -> None:
        """Never a key from the fields that are there: that would merge events the owner keyed
        apart by the missing one."""
        subject = create_subject({"id": "evt_1"})
        assert key_of(["body.id", "headers.x-tenant"], subject) is None

    def test_events_lacking_the_field_never_share_a_key(self) -> None:
        keys = {key_of(["body.id"], create_subject({"n": n})) for n in range(3)}
        assert keys == {None}

    @pytest.mark.parametrize("number", [b"1e999", b"-1e999"])
    def test_a_number_beyond_a_float_gives_no_key(self, number: bytes) -> None:
        """Python reads it as an infinity, which no canonical JSON can write."""
        assert key_of(["body.id"], create_subject(b'{"id": ' + number + b"}")) is None

    def test_a_lone_surrogate_in_a_value_still_makes_a_key(self) -> None:
        subject = create_subject(b'{"id": "\\ud800"}')
        assert key_of(["body.id"], subject) is not None
        assert key_of(["body.id"], subject) != body_key("\ufffd")


class TestKeyProperties:
    @REPRODUCIBLE
    @given(value=JSON)
    def test_any_value_gives_a_bounded_key_or_none_and_never_raises(self, value: object) -> None:
        key = dedupe_key(create_rule(fields=["body.id"]), Subject({"id": value}))
        assert key is None or (len(key) == 64 and set(key) <= set("0123456789abcdef"))
        scalar = value is not None and not isinstance(value, dict | list)
        if not scalar or (isinstance(value, str) and not value.strip()):
            assert key is None

    @REPRODUCIBLE
    @given(one=JSON, two=JSON)
    def test_equal_keys_only_for_values_equal_as_a_filter_compares_them(
        self, one: object, two: object
    ) -> None:
        rule = create_rule(fields=["body.id"])
        key_one = dedupe_key(rule, Subject({"id": one}))
        key_two = dedupe_key(rule, Subject({"id": two}))
        if key_one is not None and key_one == key_two:
            assert strict_equal(one, two)

from __future__ import annotations

import json

import pytest

from hookbay_sandbox.model import TransformError, TransformRequest
from hookbay_sandbox.output import validate

LIMIT = 10_000


def create_output(**changes: object) -> str:
    data: dict[str, object] = {"headers": {"a": "b"}, "query": "", "path": "/"}
    data.update(changes)
    return json.dumps(data, ensure_ascii=False)


BODY = '{"x":1}'


class TestValidate:
    def test_a_request_passes_and_extra_keys_are_ignored(self) -> None:
        result = validate(create_output(method="PUT"), BODY, LIMIT)

        assert result == TransformRequest({"a": "b"}, {"x": 1}, "", "/")
        assert isinstance(result, TransformRequest)
        assert result.body_json == BODY

    @pytest.mark.parametrize("body", [None, 1, "text", [1, 2], {"a": None}, True])
    def test_the_body_may_be_any_json_value(self, body: object) -> None:
        result = validate(create_output(), json.dumps(body), LIMIT)

        assert isinstance(result, TransformRequest)
        assert result.body == body

    @pytest.mark.parametrize(
        ("output", "reason"),
        [
            ("[1]", "not array"),
            ("3", "not number"),
            ('"req"', "not string"),
            ("null", "not null"),
            (json.dumps({"headers": {}, "path": "/"}), "has no query"),
            (create_output(headers=[]), "headers must be an object, not array"),
            (create_output(headers={"a": 1}), "must be a string, not number"),
            (create_output(headers={"a": None}), "must be a string, not null"),
            (create_output(headers={"a": "x\r\nInjected: 1"}), "line break"),
            (create_output(headers={"bad name": "x"}), "not a header name"),
            (create_output(query=1), "request.query must be a string"),
            (create_output(path="relative"), "must start with /"),
            (create_output(pad="x" * LIMIT), f"larger than {LIMIT} bytes"),
            ("{not json", "not JSON"),
        ],
    )
    def test_what_is_not_a_request_is_invalid_with_its_reason(
        self, output: str, reason: str
    ) -> None:
        result = validate(output, BODY, LIMIT)

        assert isinstance(result, TransformError)
        assert result.kind == "invalid_output"
        assert reason in result.message

    def test_a_missing_body_is_invalid(self) -> None:
        result = validate(create_output(), "", LIMIT)

        assert isinstance(result, TransformError)
        assert "has no body" in result.message

    def test_the_size_limit_counts_utf8_bytes_of_both_parts(self) -> None:
        body = json.dumps("é" * 3000, ensure_ascii=False)  # 6,002 bytes as UTF-8

        assert isinstance(validate(create_output(), body, 5000), TransformError)
        assert isinstance(validate(create_output(), body, 7000), TransformRequest)


class TestTransformRequest:
    def test_a_body_given_as_json_is_spliced_and_parsed_only_when_read(self) -> None:
        request = TransformRequest({"a": "b"}, query="q=1", path="/p", body_json='{"x": [1, 2]}')

        assert json.loads(request.to_json()) == {
            "body": {"x": [1, 2]},
            "headers": {"a": "b"},
            "query": "q=1",
            "path": "/p",
        }
        assert request.body == {"x": [1, 2]}

    def test_a_body_given_as_a_value_is_encoded_once(self) -> None:
        request = TransformRequest({}, "café")

        assert request.body_json == '"café"'
        assert json.loads(request.to_json())["body"] == "café"

    def test_the_body_comes_one_way_only(self) -> None:
        with pytest.raises(TypeError):
            TransformRequest({}, {"x": 1}, body_json="{}")
        with pytest.raises(TypeError):
            TransformRequest({})

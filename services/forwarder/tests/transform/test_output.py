from __future__ import annotations

import json

import pytest

from hookbay_forwarder.transform.model import TransformError, TransformRequest
from hookbay_forwarder.transform.output import validate

LIMIT = 10_000


def create_output(**changes: object) -> str:
    data: dict[str, object] = {"headers": {"a": "b"}, "body": {"x": 1}, "query": "", "path": "/"}
    data.update(changes)
    return json.dumps(data, ensure_ascii=False)


class TestValidate:
    def test_a_request_passes_and_extra_keys_are_ignored(self) -> None:
        result = validate(create_output(method="PUT"), LIMIT)

        assert result == TransformRequest({"a": "b"}, {"x": 1}, "", "/")

    @pytest.mark.parametrize("body", [None, 1, "text", [1, 2], {"a": None}, True])
    def test_the_body_may_be_any_json_value(self, body: object) -> None:
        result = validate(create_output(body=body), LIMIT)

        assert isinstance(result, TransformRequest)
        assert result.body == body

    @pytest.mark.parametrize(
        ("output", "reason"),
        [
            ("[1]", "not array"),
            ("3", "not number"),
            ('"req"', "not string"),
            ("null", "not null"),
            (json.dumps({"headers": {}, "query": "", "path": "/"}), "has no body"),
            (create_output(headers=[]), "headers must be an object, not array"),
            (create_output(headers={"a": 1}), "must be a string, not number"),
            (create_output(headers={"a": None}), "must be a string, not null"),
            (create_output(headers={"a": "x\r\nInjected: 1"}), "line break"),
            (create_output(headers={"bad name": "x"}), "not a header name"),
            (create_output(query=1), "request.query must be a string"),
            (create_output(path="relative"), "must start with /"),
            (create_output(body="x" * LIMIT), f"larger than {LIMIT} bytes"),
            ("{not json", "not JSON"),
        ],
    )
    def test_what_is_not_a_request_is_invalid_with_its_reason(
        self, output: str, reason: str
    ) -> None:
        result = validate(output, LIMIT)

        assert isinstance(result, TransformError)
        assert result.kind == "invalid_output"
        assert reason in result.message

    def test_the_size_limit_counts_utf8_bytes(self) -> None:
        output = create_output(body="é" * 3000)  # 6,000 bytes as UTF-8, 3,000 characters

        assert isinstance(validate(output, 5000), TransformError)
        assert isinstance(validate(output, 7000), TransformRequest)

from __future__ import annotations

import re
from pathlib import Path

from hookbay_sandbox import CODE_MAX_BYTES, check_transformation
from tests.support.transform import IDENTITY


class TestCheckTransformation:
    def test_valid_code_passes(self) -> None:
        assert check_transformation(IDENTITY) is None

    def test_a_syntax_error_has_its_line_and_column(self) -> None:
        error = check_transformation("addHandler('transform', (r) => {\n  return r +;\n})")

        assert error is not None
        assert error.kind == "syntax"
        assert error.message.startswith("SyntaxError")
        assert (error.line, error.column) == (2, 13)

    def test_code_over_the_size_limit_is_refused(self) -> None:
        error = check_transformation(IDENTITY + "//" + "x" * CODE_MAX_BYTES)

        assert error is not None
        assert error.kind == "too_large"

    def test_code_that_registers_no_handler_is_refused(self) -> None:
        error = check_transformation("function transform(payload) { return payload }")

        assert error is not None
        assert error.kind == "runtime"
        assert "addHandler('transform'" in error.message

    def test_a_handler_of_another_type_is_refused(self) -> None:
        error = check_transformation("addHandler('filter', (r) => r)")

        assert error is not None
        assert "the only handler type is 'transform'" in error.message

    def test_a_throwing_top_level_is_refused_with_its_place(self) -> None:
        error = check_transformation("const a = 1;\nnull.x;\naddHandler('transform', (r) => r)")

        assert error is not None
        assert error.kind == "runtime"
        assert error.line == 2

    def test_a_spinning_top_level_is_bounded(self) -> None:
        error = check_transformation("while (true) {}")

        assert error is not None
        assert error.kind == "timeout"

    def test_the_handler_is_not_called(self) -> None:
        assert check_transformation("addHandler('transform', (r) => { while (true) {} })") is None


class TestOwnerPageExamples:
    def test_every_example_on_the_owners_page_passes_the_check(self) -> None:
        page = Path(__file__).resolve().parents[3] / "docs" / "owners" / "transformations.md"
        examples = re.findall(r"```js\n(.*?)```", page.read_text(), re.S)

        assert len(examples) >= 4
        for code in examples:
            assert check_transformation(code) is None, code

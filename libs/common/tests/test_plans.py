from __future__ import annotations

from pathlib import Path

import pytest

from hookbay_common.errors import ConfigurationError, PlanNotFound
from hookbay_common.plans import load_plans


class TestDefaultPlans:
    def test_the_three_plans_of_the_design(self) -> None:
        book = load_plans()
        assert book.names() == ["free", "pro", "starter"]
        assert book.default == "free"
        assert (book.get("free").rate_per_minute, book.get("free").retention_days) == (10, 30)
        assert (book.get("starter").rate_per_minute, book.get("starter").retention_days) == (
            300,
            90,
        )
        assert (book.get("pro").rate_per_minute, book.get("pro").retention_days) == (1500, None)
        assert book.get("free").rate_label == "10 requests per minute"

    def test_unknown_plan(self) -> None:
        with pytest.raises(
            PlanNotFound, match="unknown plan 'gold' \\(known: free, pro, starter\\)"
        ):
            load_plans().get("gold")


class TestPlansFile:
    def test_operator_file_extends_plans(self, tmp_path: Path) -> None:
        path = tmp_path / "plans.yaml"
        path.write_text(
            "default: team\nplans:\n  team: {rate_per_minute: 600, retention_days: 180}\n"
            "  free: {rate_per_minute: 10, retention_days: 30}\n"
        )
        book = load_plans(path)
        assert book.default == "team"
        assert book.get("team").rate_per_minute == 600
        assert "team" in book
        assert "pro" not in book

    @pytest.mark.parametrize(
        ("text", "fragment"),
        [
            (
                "plans: [",
                "not valid YAML (expected the node content, but found '<stream end>' at line 1, column 9)",
            ),
            ("default: free\n", "plans: Field required"),
            (
                "default: gold\nplans:\n  free: {rate_per_minute: 1, retention_days: 1}\n",
                "default plan 'gold'",
            ),
            (
                "default: free\nplans:\n  free: {rate_per_minute: 0, retention_days: 1}\n",
                "plans.free.rate_per_minute",
            ),
            (
                "default: free\nplans:\n  free: {rate_per_minute: 5}\n",
                "plans.free.retention_days: Field required",
            ),
            (
                "default: free\nplans:\n  free: {rate_per_minute: 5, retention_days: 1, x: 1}\n",
                "plans.free.x",
            ),
            ("default: free\nplans: {}\n", "at least 1 item"),
            (
                "default: Bad Name\nplans:\n  Bad Name: {rate_per_minute: 5, retention_days: 1}\n",
                "name",
            ),
        ],
    )
    def test_errors_name_the_file_and_the_fault(
        self, tmp_path: Path, text: str, fragment: str
    ) -> None:
        path = tmp_path / "plans.yaml"
        path.write_text(text)
        with pytest.raises(ConfigurationError) as caught:
            load_plans(path)
        assert str(path) in caught.value.message
        assert fragment in caught.value.message

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigurationError, match="cannot read it"):
            load_plans(tmp_path / "nope.yaml")

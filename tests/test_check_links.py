"""The documentation link checker (scripts/check_links.py) on a small made-up repository."""

from __future__ import annotations

from pathlib import Path

from check_links import check, github_anchor, main


def create_repo(tmp_path: Path, readme: str) -> Path:
    (tmp_path / "docs" / "owners").mkdir(parents=True)
    (tmp_path / "docs" / "owners" / "cli.md").write_text(
        "# The CLI\n\n## `hookbay webhook set`: change a webhook\n\n```\n# inside a fence\n```\n"
    )
    (tmp_path / "docs" / "README.md").write_text("# Docs\n\n[CLI](owners/cli.md#the-cli)\n")
    (tmp_path / "README.md").write_text(readme)
    return tmp_path


class TestGithubAnchor:
    def test_lower_case_punctuation_dropped_spaces_hyphenated(self) -> None:
        assert github_anchor("What a 200 guarantees") == "what-a-200-guarantees"
        assert github_anchor("`hookbay webhook set`: change a webhook") == (
            "hookbay-webhook-set-change-a-webhook"
        )
        assert github_anchor("Accepted → visible under load") == "accepted--visible-under-load"


class TestCheck:
    def test_good_links_pass(self, tmp_path: Path) -> None:
        root = create_repo(
            tmp_path,
            "# hookbay\n\n## Tour\n\n[docs](docs/README.md), [cli](docs/owners/cli.md"
            "#hookbay-webhook-set-change-a-webhook), [here](#tour), "
            "[web](https://example.com/x#y), `[code](nowhere.md)`\n",
        )
        assert check(root) == []
        assert main([str(root)]) == 0

    def test_broken_file_is_reported(self, tmp_path: Path) -> None:
        root = create_repo(tmp_path, "# hookbay\n\nSee [missing](docs/missing.md).\n")
        broken = check(root)
        assert [(b.page.name, b.line, b.target, b.reason) for b in broken] == [
            ("README.md", 3, "docs/missing.md", "no such file")
        ]
        assert main([str(root)]) == 1

    def test_broken_anchor_is_reported(self, tmp_path: Path) -> None:
        root = create_repo(
            tmp_path, "# hookbay\n\n[a](docs/owners/cli.md#not-a-heading) [b](#nowhere)\n"
        )
        broken = check(root)
        assert [(b.target, b.reason) for b in broken] == [
            ("docs/owners/cli.md#not-a-heading", "no such heading"),
            ("#nowhere", "no such heading"),
        ]

    def test_heading_inside_a_code_fence_is_no_anchor(self, tmp_path: Path) -> None:
        root = create_repo(tmp_path, "# hookbay\n\n[a](docs/owners/cli.md#inside-a-fence)\n")
        assert [b.reason for b in check(root)] == ["no such heading"]

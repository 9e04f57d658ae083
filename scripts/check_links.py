"""Check the relative links of the repository's Markdown documentation.

Every ``[text](target)`` and ``![alt](target)`` in README.md, SECURITY.md, CONTRIBUTING.md,
CHANGELOG.md and docs/**/*.md whose target is not an absolute URL must name an existing file
(relative to the page), and its ``#anchor``, when there is one and the target is a Markdown
page, must be one of that page's headings under GitHub's anchor rules. Exits 1 listing every
broken link as ``page:line: target (reason)``; exits 0 when all resolve.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL_PAGES = ("README.md", "SECURITY.md", "CONTRIBUTING.md", "CHANGELOG.md")

_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]+(?:\([^()\s]*\))?)>?(?:\s+\"[^\"]*\")?\s*\)"
)
_REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class BrokenLink:
    """A link of ``page`` (at ``line``) that does not resolve, and why."""

    page: Path
    line: int
    target: str
    reason: str

    def render(self, root: Path) -> str:
        return f"{self.page.relative_to(root)}:{self.line}: {self.target} ({self.reason})"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: markup removed, lower case, punctuation dropped
    (letters, digits, ``-``, ``_`` and spaces kept), spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").strip().lower()
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char in "-_ " or category[0] in "LN" or category == "Mn":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def _lines_outside_fences(text: str) -> Iterator[tuple[int, str]]:
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, line


def anchors(text: str) -> set[str]:
    """Every anchor a Markdown page offers: its headings (a repeated one gets ``-1``, ``-2``,
    ... as on GitHub) and explicit ``<a name=...>`` / ``id=...`` anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _lines_outside_fences(text):
        found.update(_HTML_ANCHOR.findall(line))
        match = _HEADING.match(line)
        if match is None:
            continue
        slug = github_anchor(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(text: str) -> Iterator[tuple[int, str]]:
    """``(line, target)`` of every inline link, image and reference definition outside code."""
    for number, line in _lines_outside_fences(text):
        line = _INLINE_CODE.sub("", line)
        for match in _LINK.finditer(line):
            yield number, match.group(1)
        definition = _REFERENCE_DEFINITION.match(line)
        if definition is not None:
            yield number, definition.group(1)


def check_page(page: Path, root: Path) -> list[BrokenLink]:
    """The broken relative links of one page."""
    broken: list[BrokenLink] = []
    text = page.read_text(encoding="utf-8")
    for line, target in links(text):
        if _SCHEME.match(target) or target.startswith("//"):
            continue  # an absolute URL: not this checker's business
        path_part, _, anchor = target.partition("#")
        if path_part:
            resolved = (page.parent / path_part).resolve()
            if not resolved.exists():
                broken.append(BrokenLink(page, line, target, "no such file"))
                continue
            if root not in resolved.parents and resolved != root:
                broken.append(BrokenLink(page, line, target, "outside the repository"))
                continue
        else:
            resolved = page
        if (
            anchor
            and resolved.is_file()
            and resolved.suffix == ".md"
            and anchor not in anchors(resolved.read_text(encoding="utf-8"))
        ):
            broken.append(BrokenLink(page, line, target, "no such heading"))
    return broken


def pages(root: Path) -> list[Path]:
    """The documentation pages checked: the top-level ones that exist and docs/**/*.md."""
    found = [root / name for name in TOP_LEVEL_PAGES if (root / name).is_file()]
    found.extend(sorted((root / "docs").rglob("*.md")))
    return found


def check(root: Path, checked: Iterable[Path] | None = None) -> list[BrokenLink]:
    """Every broken link of ``checked`` (by default every documentation page under ``root``)."""
    root = root.resolve()
    broken: list[BrokenLink] = []
    for page in checked if checked is not None else pages(root):
        broken.extend(check_page(page.resolve(), root))
    return broken


def main(argv: list[str] | None = None) -> int:
    root = Path(argv[0]) if argv else ROOT
    broken = check(root)
    for link in broken:
        print(link.render(root.resolve()), file=sys.stderr)
    if broken:
        print(f"check_links: {len(broken)} broken link(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

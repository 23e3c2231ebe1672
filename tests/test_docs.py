"""README.md stays a short guide and the documentation under docs/ holds together: every
relative link points at a file that exists and every `#anchor` at a heading of its target (as
GitHub makes anchors), and README links every docs/ page, so none can be orphaned."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 400

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$", re.MULTILINE)
# [text](target) and ![alt](target); an angle-bracketed <https://…> autolink is not a link here.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text outside fenced code and code spans, where `[x](y)` really is a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than - and _ dropped
    (letters and digits of any script kept, code marks and emoji dropped), spaces to -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2… as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCE.sub("", text)):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of `page` whose file or heading does not exist, as `page: target`."""
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: …
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(root)}: {target}"
        if not dest.exists() or root not in (dest, *dest.parents):
            broken.append(f"{where} (no such file)")
        elif anchor and (
            dest.suffix != ".md" or anchor not in anchors(dest.read_text(encoding="utf-8"))
        ):
            broken.append(f"{where} (no such heading)")
    return broken


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def test_readme_is_a_short_guide() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines; keep it a guide of at most {README_MAX_LINES} and "
        "move chapters to docs/"
    )


def test_every_relative_link_and_anchor_exists() -> None:
    broken = [b for page in pages() for b in broken_links(page)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_links_every_docs_page() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for target in LINK.findall(prose((ROOT / "README.md").read_text(encoding="utf-8")))
    }
    orphans = [p.name for p in pages()[1:] if p.resolve() not in linked]
    assert not orphans, f"docs/ pages README.md does not link: {orphans}"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[x](docs/missing.md)", "no such file"),
        ("[x](docs/guide.md#no-such-part)", "no such heading"),
        ("[x](#elsewhere)", "no such heading"),
        ("[x](docs/guide.md#settings-2)", "no such heading"),
        ("[x](../outside.md)", "no such file"),
    ],
)
def test_the_link_check_catches_a_broken_link(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "outside.md").write_text("x")  # a file, but not the repository's
    site = tmp_path / "site"
    (site / "docs").mkdir(parents=True)
    guide = "# Guide\n\n## Settings\n\n### Settings\n\n```\n# not a heading\n```\n"
    (site / "docs" / "guide.md").write_text(guide)
    readme = site / "README.md"
    readme.write_text(f"# Readme\n\n{text}\n")
    (found,) = broken_links(readme, site)
    assert problem in found


def test_the_link_check_follows_github_anchors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    guide = "# Guide\n\n## Settings: the `[a]` part 👀\n\n### Settings\n\n### Settings\n"
    (tmp_path / "docs" / "guide.md").write_text(guide)
    readme = tmp_path / "README.md"
    readme.write_text(
        "[a](docs/guide.md#settings-the-a-part-) [b](docs/guide.md#settings-1) "
        "[c](docs/guide.md#settings) [d](#readme) `[e](#not-a-link)`\n\n# Readme\n"
    )
    assert broken_links(readme, tmp_path) == []

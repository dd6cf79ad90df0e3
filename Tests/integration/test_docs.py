"""The README stays a front door and the documentation's links lead somewhere.

Needs no stack. Checks:
- README.md is at most 250 lines (issue 21: what TodoSync is, the Quick start, a short API and
  client tour, links; the manual lives in docs/);
- the Quick start's two commands are its first two code blocks, one command each, and the second
  is the test command .ci/run runs;
- every relative link in README.md and docs/*.md names a file or directory of the repository,
  and every `#anchor` (in the same file or in another Markdown file) names a heading there, by
  GitHub's rule for heading ids (lower case; characters other than letters, marks, digits,
  connector punctuation, spaces and hyphens dropped; spaces to hyphens; `-1`, `-2`, ... for
  repeats) or an explicit `<a id="...">` / `<a name="...">`.
Links inside code blocks and code spans are not links, and are not checked.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
DOCS = sorted([README, *(REPO_ROOT / "docs").glob("*.md")])
README_MAX_LINES = 250

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:id|name)\s*=\s*\"([^\"]+)\"", re.IGNORECASE)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(path: Path):
    """(line number, text) of every line outside fenced code blocks, with code spans removed."""
    fence = None
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)[0] * len(opening.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                fence = None
            continue
        yield number, line


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = "".join(c for c in text
                   if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path):
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path):
    for number, line in prose_lines(path):
        text = CODE_SPAN.sub("", line)
        for target in INLINE_LINK.findall(text):
            yield number, target
        definition = REFERENCE_DEFINITION.match(text)
        if definition:
            yield number, definition.group(1)


def is_relative(target: str) -> bool:
    return bool(target) and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//", target)


def broken_links(path: Path) -> list[str]:
    problems = []
    for number, target in links(path):
        if not is_relative(target):
            continue
        file_part, _, fragment = target.partition("#")
        where = f"{path.relative_to(REPO_ROOT)}:{number}: {target}"
        destination = (path.parent / unquote(file_part)).resolve() if file_part else path
        if REPO_ROOT not in destination.parents and destination != REPO_ROOT:
            problems.append(f"{where} (leaves the repository)")
        elif not destination.exists():
            problems.append(f"{where} (no such file)")
        elif fragment and destination.suffix == ".md" and unquote(fragment) not in anchors(destination):
            problems.append(f"{where} (no such heading in {destination.relative_to(REPO_ROOT)})")
    return problems


def test_readme_is_a_front_door_of_at_most_250_lines():
    lines = README.read_text(encoding="utf-8").rstrip("\n").count("\n") + 1
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to docs/ and link it")


def test_quick_start_gives_the_two_commands_first_and_ci_runs_the_test_command():
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    first, second = (block.strip() for block in blocks[:2])
    assert text.index("## Quick start") < text.index("```"), "the Quick start's commands come first"
    assert (first, second) == ("./scripts/run.sh", "./scripts/test.sh"), (first, second)
    ci = [line.strip() for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == second, f".ci/run ends with {ci[-1]!r}, the README's test command is {second!r}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []


def test_the_link_check_sees_links_and_catches_broken_ones(tmp_path, monkeypatch):
    """The checker itself: a broken file, a broken anchor and a good anchor, in a scratch repo."""
    monkeypatch.setitem(globals(), "REPO_ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "A.md").write_text("# Title\n\n## What `this` is: (really) ünïcode\n\n## Title\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/A.md#what-this-is-really-ünïcode) [ok](docs/A.md#title-1) [ok](#top)\n"
        "<a id=\"top\"></a>\n"
        "[gone](docs/B.md) [bad anchor](docs/A.md#nope) `[code](nowhere.md)`\n"
        "```\n[in a block](nowhere.md)\n```\n"
        "[outside](https://example.com/x.md)\n")
    assert [p.split(": ", 1)[1] for p in broken_links(page)] == [
        "docs/B.md (no such file)", "docs/A.md#nope (no such heading in docs/A.md)"]

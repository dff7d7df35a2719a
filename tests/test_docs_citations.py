"""Every citation in code, SQL, YAML, help texts and docs points at a page and section that exist.

Code and SQL cite their definitions as ``docs/method.md#3-associations`` or
``docs/families/modscan.md#s_bias``; the docs link each other with relative Markdown links. A
user who follows one must land on a real heading, so this checks each cited file and each
``#anchor`` against the GitHub-style slugs of the file's headings. The specs the code was
first written against are not in the repository, so nothing may cite them; and a comment says
why, not which issue asked for it (an "issue N" tag tells a reader nothing).
"""

from __future__ import annotations

import io
import os
import re
import tokenize
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "target", "dbt_packages", "logs", "__pycache__", ".pytest_cache"}
SUFFIXES = {".py", ".sql", ".yml", ".yaml", ".md", ".sh", ".toml"}
THIS = Path(__file__).resolve()

#: "docs/method.md#3-associations", "docs/families/", "``docs/cli.md``" in any text
DOCS_CITATION = re.compile(r"(?<![\w/.-])docs/(?:[\w-]+/)*(?:[\w-]+\.md(?:#[\w-]+)?)?")
#: relative Markdown links: [text](target)
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
#: files that are not in the repository (the specs dora was built from)
ABSENT = re.compile(r"\b(?:METHOD|PROBES|STACK|STYLE)\.md\b|\.\./shared\b|shared/spec/")
ISSUE_TAG = re.compile(r"\bissues?\s+\d+", re.IGNORECASE)
#: where a comment, docstring or help text must give a reason, not an issue number
REASON_DIRS = ("ingestion", "models_inference", "analytics", "orchestration", "scripts", "benchmarks", "dbt_project", "tests")


def repo_files(*tops: str):
    """The repository's text files under ``tops`` (default: all), sorted. The walk does not enter
    SKIP_DIRS nor the top-level ``data/`` (an audit's default home): a ``.venv`` alone holds ~100k
    files, and walking it before filtering took 2-11 s of a loaded CI run."""
    bases = [ROOT / t for t in tops] if tops else [ROOT]
    found = []
    for base in bases:
        if not base.exists():
            continue
        for dirpath, dirs, files in os.walk(base):
            here = Path(dirpath)
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not (here == ROOT and d == "data")]
            found += [here / f for f in files if Path(f).suffix in SUFFIXES]
    yield from (p for p in sorted(found) if p.is_file() and p.resolve() != THIS)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@lru_cache(maxsize=None)
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if in_code or not m:
            continue
        slug = github_slug(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(out)


def check_target(target: Path, anchor: str | None, where: str, problems: list[str]) -> None:
    if not target.exists():
        problems.append(f"{where}: {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target} does not exist")
    elif anchor is not None:
        if target.is_dir() or target.suffix != ".md":
            problems.append(f"{where}: #{anchor} on a path that is not a Markdown page")
        elif anchor not in anchors(target):
            problems.append(f"{where}: {target.relative_to(ROOT)} has no heading with anchor #{anchor}")


def test_slug_matches_github():
    assert github_slug("3a. Paper statistics") == "3a-paper-statistics"
    assert github_slug("The paper's tables") == "the-papers-tables"
    assert github_slug("S_bias") == "s_bias"
    assert github_slug("Scale: a fleet of servers and the scale-out path") == "scale-a-fleet-of-servers-and-the-scale-out-path"
    assert github_slug("How to read a dora diff") == "how-to-read-a-dora-diff"


def test_docs_pages_exist():
    """The shared pages, and one page per probe family (``docs/families/<name>.md``) and no page
    of a family that does not exist."""
    from orchestration.families import FAMILIES

    for page in ("method.md", "cli.md", "statistics.md", "operations.md"):
        assert (ROOT / "docs" / page).is_file(), page
    assert [f.name for f in FAMILIES if not f.page.is_file()] == []
    pages = {p for p in (ROOT / "docs" / "families").glob("*.md") if p.name != "README.md"}
    assert pages == {f.page for f in FAMILIES if f.page.parent == ROOT / "docs" / "families"} and len(pages) > 1


def test_family_pages_share_their_headings():
    """Every family page has the same top-level sections, so a reader finds the same thing in each
    (a family kept outside the repository too: its record's page)."""
    from orchestration.families import FAMILIES

    pages = sorted((ROOT / "docs" / "families").glob("*.md"))
    pages = [p for p in pages if p.name != "README.md"] + [f.page for f in FAMILIES if f.page not in pages]
    tops = {p.name: [m.group(1) for m in re.finditer(r"^## (.+)$", p.read_text(encoding="utf-8"), re.M)] for p in pages}
    first = next(iter(tops.values()))
    assert first[:2] == ["Paper", "What it measures"], first
    assert "Deviations from the paper" in first and "Checked against the paper" in first
    for name, headings in tops.items():
        assert headings == first, f"{name}: {headings} != {first}"


@pytest.mark.slow  # reads every doc, docstring and help text: 3.5-5 s
def test_every_docs_citation_exists():
    """``docs/...`` in code, SQL, YAML, help texts and Markdown: the file exists, and so does its #anchor."""
    problems: list[str] = []
    cited = 0
    for p in repo_files():
        text = p.read_text(encoding="utf-8", errors="replace")
        for m in DOCS_CITATION.finditer(text):
            cite = m.group(0)
            path, _, anchor = cite.partition("#")
            line = text.count("\n", 0, m.start()) + 1
            check_target(ROOT / path, anchor or None, f"{p.relative_to(ROOT)}:{line}: {cite}", problems)
            cited += 1
    assert cited > 100, f"only {cited} docs/ citations found: is the scan broken?"
    assert not problems, "\n".join(problems)


def test_markdown_links_resolve():
    """Relative links of README, ARCHITECTURE, BENCHMARKS and docs/ reach a file and a heading."""
    problems: list[str] = []
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        if not page.exists():
            continue
        text = page.read_text(encoding="utf-8")
        for m in MD_LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):  # http(s), mailto
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            line = text.count("\n", 0, m.start()) + 1
            check_target(dest, anchor or None, f"{page.relative_to(ROOT)}:{line}: ({target})", problems)
    assert not problems, "\n".join(problems)


def test_nothing_cites_files_outside_the_repository():
    problems = []
    for p in repo_files():
        for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if ABSENT.search(line):
                problems.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()[:120]}")
    assert not problems, "cites a file that is not in the repository:\n" + "\n".join(problems)


def _python_texts(path: Path):
    """(line, text) of every comment and string literal (docstrings, help texts) of a module."""
    src = path.read_text(encoding="utf-8")
    kinds = {tokenize.COMMENT, tokenize.STRING}
    kinds |= {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in kinds:
            yield tok.start[0], tok.string


@pytest.mark.parametrize("top", REASON_DIRS)
def test_comments_give_reasons_not_issue_numbers(top):
    """No comment, docstring or help text says "issue N": it says why instead.

    tests/ is held to the same rule: a test's docstring is read as often as the code's.
    """
    problems = []
    for p in repo_files(top):
        if p.suffix == ".py":
            texts = _python_texts(p)
        else:
            texts = enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        for line, text in texts:
            for m in ISSUE_TAG.finditer(text):
                problems.append(f"{p.relative_to(ROOT)}:{line}: ...{text[max(0, m.start() - 40) : m.end() + 40].strip()}...")
    assert not problems, "\n".join(problems)

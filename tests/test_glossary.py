"""One word per concept (docs/glossary.md): the old spellings still read live in one table,
``orchestration/deprecation.py``, and nothing else names them: not a doc, not a ``--help`` text,
not a module of the four packages or of ``scripts/``. The glossary lists each term once."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from orchestration.deprecation import LANDED_COLUMNS, RENAMED_FLAGS, RETIRED_NAMES

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ingestion", "models_inference", "analytics", "orchestration", "scripts")
#: where an old spelling may be written: the table itself, and the glossary's "not called" column
ALLOWED = {"orchestration/deprecation.py", "docs/glossary.md"}
RETIRED = sorted({old for olds in RENAMED_FLAGS.values() for old in olds} | set(RETIRED_NAMES))


def _pattern(words) -> re.Pattern:
    """A whole flag or name: ``--probe`` but not ``--probe-x`` or ``x--probe``."""
    return re.compile("|".join(rf"(?<![\w-]){re.escape(w)}(?![\w-])" for w in words))


def retired_spellings(root: Path = ROOT, words=RETIRED) -> list[str]:
    """``path:line: word`` of every retired spelling in the docs (``*.md`` at the top and under
    ``docs/``) and the Python files of :data:`PACKAGES`, outside :data:`ALLOWED`."""
    pattern = _pattern(words)
    files = [*root.glob("*.md"), *(root / "docs").rglob("*.md")]
    files += [p for package in PACKAGES for p in (root / package).rglob("*.py")]
    out = []
    for path in sorted(files):
        rel = path.relative_to(root).as_posix()
        if rel in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            out += [f"{rel}:{number}: {m.group()}" for m in pattern.finditer(line)]
    return out


def test_no_retired_spelling_in_docs_or_code():
    assert retired_spellings() == []


def test_the_check_finds_a_retired_spelling(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cli.md").write_text("use --family\nold: `--cf-seeds 3`, not --cf-seeds-x\n")
    (tmp_path / "docs" / "glossary.md").write_text("| run | ... | seed (`--cf-seeds`) |\n")
    (tmp_path / "analytics").mkdir()
    (tmp_path / "analytics" / "x.py").write_text("from y import RunTarget\n")
    assert retired_spellings(tmp_path) == ["analytics/x.py:1: RunTarget", "docs/cli.md:2: --cf-seeds"]


def help_texts() -> dict[str, str]:
    """Every ``--help`` dora prints: each command's and sub-command's, and ``dora audit
    --help-family NAME`` of each family."""
    from orchestration import families as fam
    from orchestration.cli.parser import AUDIT_DESCRIPTION, add_audit_arguments, build_parser

    texts = {}

    def walk(parser, words):
        texts[" ".join(words)] = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name))

    walk(build_parser(), ("dora",))
    for family in fam.FAMILIES:
        helper = argparse.ArgumentParser(prog="dora audit", description=AUDIT_DESCRIPTION)
        add_audit_arguments(helper, shown=family.name)
        texts[f"dora audit --help-family {family.name}"] = helper.format_help()
    return texts


#: "run" as a noun for the orchestrator's execution, without "Dagster" before it: a failed run,
#: the next run, during the run (a repetition of a prompt is "k runs", "each run", "--runs")
BARE_DAGSTER_RUN = re.compile(r"(?<!Dagster )\b(?:a failed|the next|its next|during the|its real|one) run\b", re.IGNORECASE)


def test_help_names_no_retired_spelling_and_says_dagster_run():
    texts = help_texts()
    assert {"dora", "dora audit", "dora diff", "dora batch export"} <= set(texts)
    retired = _pattern(RETIRED)
    found = {name: retired.findall(" ".join(text.split())) for name, text in texts.items()}
    assert {name: words for name, words in found.items() if words} == {}
    bare = {name: BARE_DAGSTER_RUN.findall(" ".join(text.split())) for name, text in texts.items()}
    assert {name: words for name, words in bare.items() if words} == {}


def glossary_terms(text: str) -> list[str]:
    """The bold words of the glossary table's first column, in order."""
    return [m.group(1) for m in re.finditer(r"^\| \*\*(.+?)\*\* \|", text, re.MULTILINE)]


def test_the_glossary_lists_each_term_once():
    terms = glossary_terms((ROOT / "docs" / "glossary.md").read_text(encoding="utf-8"))
    assert {"run", "Dagster run", "audit", "family", "target"} <= set(terms)
    assert len(terms) == len(set(terms)), [t for t in terms if terms.count(t) > 1]
    assert glossary_terms("| **run** | a |\n| **seed** | b |\n| **run** | c |\n") == ["run", "seed", "run"]


def test_every_old_column_name_is_a_landed_column():
    """The columns kept under an old name are in the landing contract (what keeps old files readable)."""
    from ingestion.contracts import SCHEMAS

    for table, columns in LANDED_COLUMNS.items():
        assert set(columns) <= set(SCHEMAS[table].names), table

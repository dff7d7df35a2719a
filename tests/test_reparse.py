"""``dora reparse``: landed raw outputs re-read by the current parser, no model call; the corrected
rows are appended and staging keeps them (models_inference/probes/biasdora/reparse.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import duckdb
import pytest

from ingestion.landing import read_landing, write_shard
from models_inference.probes.biasdora.parsing import PARSER_VERSION
from tests.helpers.landing_rows import T0, completion

AUDIT = "t2t-old-parser-0001"
NOW = datetime(2025, 3, 1, tzinfo=timezone.utc)


def _old_parser_rows() -> list[dict]:
    """What an older parser landed: mojibake cut at its first non-ASCII byte ("fianc"), a new word
    after the prefilled letter read as its continuation ("ibeam"), a row it read right, a failed call."""

    def row(descriptor, letter, raw, word, status, run=1):
        r = completion(AUDIT, descriptor, word, letter=letter, run=run, parse_status=status, generated_at=T0)
        return {**r, "raw_output": raw, "prompt": f"The {descriptor} is a {letter}"}

    return [
        row("old person", "f", "iancÃ© who", "fianc", "ok"),
        row("old person", "i", "Beam product", "ibeam", "ok"),
        row("rich person", "b", "rawler, and he", "brawler", "ok"),
        row("rich person", "c", "backend timed out", None, "error"),
    ]


def test_reparse_lands_only_what_the_current_parser_reads_differently(dora_home):
    from ingestion.errors import ReparseError
    from models_inference.probes.biasdora.reparse import reparse_t2t

    write_shard("t2t_completions", _old_parser_rows(), partition=AUDIT)
    summary = reparse_t2t(AUDIT, now=NOW)

    assert (summary.completions, summary.landed) == (4, 2)
    assert summary.changes == {("ok", "ok"): 1, ("ok", "new_word"): 1}
    assert summary.skipped == {"error: the call failed, no output to parse": 1}
    landed = [r for r in read_landing("t2t_completions").to_pylist() if r["reparsed_at"] is not None]
    assert sorted((r["letter"], r["word"], r["parse_status"]) for r in landed) == [("f", "fiancé", "ok"), ("i", None, "new_word")]
    # same key, raw output and generation time as the call; the parser's version and the re-parse time recorded
    assert {(r["raw_output"], r["generated_at"], r["parse_version"], r["reparsed_at"]) for r in landed} == {
        ("iancÃ© who", T0, PARSER_VERSION, NOW),
        ("Beam product", T0, PARSER_VERSION, NOW),
    }
    # idempotent: the latest row of every key is now the current parser's
    assert reparse_t2t(AUDIT, now=NOW).landed == 0
    assert len(read_landing("t2t_completions")) == 6
    with pytest.raises(ReparseError, match="no T2T completion landed for audit 'nobody'"):
        reparse_t2t("nobody")


@pytest.mark.slow
def test_staging_keeps_the_reparsed_row_and_counts_no_extra_attempt(dora_home):
    """One dbt run of stg_t2t_completions on the re-parsed landing zone."""
    from analytics.dbt_runner import invoke_dbt
    from models_inference.probes.biasdora.reparse import reparse_t2t

    write_shard("t2t_completions", _old_parser_rows(), partition=AUDIT)
    reparse_t2t(AUDIT, now=NOW)
    invoke_dbt(["run", "--select", "stg_t2t_completions"], dora_home)
    with duckdb.connect(str(dora_home / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute(
            "select letter, word, parse_status, attempts, parse_version is not null, reparsed_at is not null from stg_t2t_completions order by letter"
        ).fetchall()
    assert rows == [
        ("b", "brawler", "ok", 1, False, False),
        ("c", None, "error", 1, False, False),
        ("f", "fiancé", "ok", 1, True, True),
        ("i", None, "new_word", 1, True, True),
    ]


def test_parser_version_follows_the_rules_not_their_formatting(tmp_path):
    """The version is a digest of the parsing module's syntax tree: reformatting the module (ruff
    format, comments) keeps it, so a formatter does not make every landed row look stale, while a
    changed rule is a new version."""
    import ast
    import hashlib
    import subprocess
    import sys

    from models_inference.probes.biasdora import parsing

    def digest(path):
        return hashlib.sha256(ast.dump(ast.parse(path.read_text(encoding="utf-8"))).encode()).hexdigest()[:12]

    source = tmp_path / "parsing.py"
    source.write_text(open(parsing.__file__, encoding="utf-8").read(), encoding="utf-8")
    assert digest(source) == PARSER_VERSION
    # squeezed to 60 columns with every comment gone: the same rules
    text = "\n".join(line for line in source.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("#"))
    source.write_text(text + "\n# a comment\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", "--line-length", "60", str(source)], check=True)
    assert digest(source) == PARSER_VERSION
    source.write_text(source.read_text(encoding="utf-8").replace("_MAX_WORD_LEN = 40", "_MAX_WORD_LEN = 41"), encoding="utf-8")
    assert digest(source) != PARSER_VERSION

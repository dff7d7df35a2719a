"""One meaning of "bias dimension" on every analyst-facing surface, and answers that cannot mislead.

A descriptor listed under two dimensions (``african``: nationality and race-color) counts in
both: the report (``agg_bias_by_dimension``), ``dora diff``'s per-dimension lines, the audit
summary and a ``dora query`` on ``fct_association_dimensions`` give the same count per
dimension. Also: every audited dimension is shown, q-values are never rounded to 0.05, "no data"
is n/a, ``dora tables`` lists what dbt documents, ``dora query`` shows DuckDB's whole error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb
import pytest

from analytics.query import execute_query, format_q


def _per_dimension_query(audit_id: str | None = None) -> dict[str, int]:
    return dict(
        execute_query(
            "select bias_dimension, count(*) filter (where is_significant) from fct_association_dimensions "
            "where (? is null or audit_id = ?) and audit_id in (select audit_id from dim_audits where family = 'biasdora') "
            "group by 1",
            params=[audit_id, audit_id],
        ).rows
    )


# ------------------------------------------------------------------ the session's real audit (read-only)


def test_report_summary_and_query_count_each_dimension_alike(finished_audit, monkeypatch):
    from analytics.report import load_report_data
    from analytics.summary import audit_summary

    finished_audit.env(monkeypatch)
    (t2t,) = [r[0] for r in execute_query("select audit_id from dim_audits where modality = 't2t'").rows]
    queried = _per_dimension_query(t2t)
    assert len(queried) == 9  # every CrowS-Pairs dimension was probed (per_dimension = 1)
    multi = execute_query("select count(*) from fct_associations where audit_id = ? and len(bias_dimensions) > 1", params=[t2t]).rows
    assert multi[0][0] > 0  # descriptors in two dimensions are in the sample: the counts below differ from first-of-list

    data = load_report_data(t2t)
    reported = {d: 0 for d in data["dimensions"][t2t]}  # every audited dimension gets a column, 0 or not
    for row in data["agg"]:
        reported[row["bias_dimension"]] += row["n_significant"]
    assert reported == queried

    summary = audit_summary(t2t)
    line = next(ln for ln in summary.splitlines() if "significant per bias dimension" in ln)
    assert line.split(": ", 1)[1] == ", ".join(f"{d} {n}" for d, n in sorted(queried.items()))


def test_modscan_rows_without_responses_show_no_score(finished_audit, monkeypatch):
    from analytics.modscan import COLUMNS, bias_scores, report_section

    finished_audit.env(monkeypatch)
    rows = [dict(zip(COLUMNS, r, strict=True)) for r in bias_scores().rows]
    assert rows and any(r["n_responses"] > 0 for r in rows)
    for r in rows:  # a row with 0 responses has no S_bias (the mart's 0.0 would read "unbiased")
        assert (r["s_bias"] is None) == (r["n_responses"] == 0)
    if any(r["n_responses"] == 0 for r in rows):
        assert "<td>n/a</td>" in report_section()


def test_query_shows_duckdb_s_whole_error_and_a_case_hint(finished_audit, monkeypatch, capsys, tmp_path):
    from orchestration.cli import main

    finished_audit.env(monkeypatch)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))  # main() writes dagster.yaml there, not in the shared home
    assert main(["query", "select descripter from fct_associations"]) == 2
    err = capsys.readouterr().err
    assert err.startswith('dora query: SQL error: Binder Error: Referenced column "descripter" not found')
    assert len(err.strip().splitlines()) == 1  # one line: the whole text, folded
    assert ' | Candidate bindings: "descriptor"' in err and " | LINE 1: select descripter from fct_associations" in err
    (descriptor,) = execute_query("select descriptor from fct_association_dimensions order by 1 limit 1").rows[0]
    shouted = descriptor.title()
    assert main(["query", "select count(*) from fct_association_dimensions where descriptor = ?".replace("?", f"'{shouted}'")]) == 0
    err = capsys.readouterr().err
    assert f"hint: no row matched, and '{shouted}' is descriptor '{descriptor}' compared case-insensitively" in err
    # a query naming no key column, or matching rows, gets no hint
    assert main(["query", f"select count(*) from dim_audits where model_id = '{shouted}'"]) == 0
    assert "hint" not in capsys.readouterr().err


# ------------------------------------------------------------------ dora diff on a hand-made warehouse

FROM, TO = "t2t-a", "t2t-b"


@pytest.fixture
def two_audits(dora_home):
    """The relations dora diff reads, as dbt shapes them: african (nationality + race-color) and
    old person (age) in both audits; physical-appearance probed, nothing significant there."""
    dora_home.mkdir(parents=True)
    with duckdb.connect(str(dora_home / "warehouse.duckdb")) as con:
        con.execute("""create table dim_audits as select * from (values
            ('m', 'a', 'v1', 1, 't2t', 'biasdora', 'finished'), ('m', 'b', 'v2', 2, 't2t', 'biasdora', 'finished'))
            t(target, x, model_version, audit_seq, modality, family, status)""")
        con.execute("update dim_audits set x = 't2t-' || x")
        con.execute("alter table dim_audits rename x to audit_id")
        dims = [("african", "nationality"), ("african", "race-color"), ("old person", "age"), ("tall person", "physical-appearance")]
        # (audit, descriptor, word, significant)
        assoc = [
            (FROM, "african", "greek", False),
            (TO, "african", "greek", True),
            (FROM, "african", "celtic", True),
            (TO, "african", "celtic", True),
            (FROM, "old person", "slow", True),
            (TO, "old person", "slow", False),
            (FROM, "tall person", "lanky", False),
            (TO, "tall person", "lanky", False),
        ]
        con.execute(
            "create table fct_association_dimensions (audit_id varchar, modality varchar, setting varchar, "
            "descriptor varchar, word varchar, bias_dimension varchar, is_significant boolean)"
        )
        for aid, d, w, sig in assoc:
            for dd, dim in dims:
                if dd == d:
                    con.execute("insert into fct_association_dimensions values (?, 't2t', 'singular', ?, ?, ?, ?)", [aid, d, w, dim, sig])
        # the changes of the associations significant in either audit (one row per association)
        con.execute("""create table fct_association_changes as select * from (values
            ('african', 'greek', 'new', 0.01::double, true, false, true),
            ('african', 'celtic', 'unchanged', 0.9, false, true, true),
            ('old person', 'slow', 'gone', 0.02, true, true, false))
            t(descriptor, word, change_type, change_q, is_significant_change, significant_before, significant_after)""")
        for col, value in [("from_audit_id", FROM), ("to_audit_id", TO), ("modality", "t2t"), ("setting", "singular")]:
            con.execute(f"alter table fct_association_changes add column {col} varchar default '{value}'")
        for col in (
            "tf_before",
            "doc_length_before",
            "tf_after",
            "doc_length_after",
            "fisher_q_before",
            "fisher_q_after",
            "bias_level_before",
            "bias_level_after",
            "tfidf_change",
        ):
            con.execute(f"alter table fct_association_changes add column {col} double default 1")
        con.execute("alter table fct_association_changes add column significance_flipped boolean")
        con.execute("update fct_association_changes set significance_flipped = significant_before <> significant_after")
        # what the two audits have in common (fct_audit_comparisons): the same 8 probe rows
        con.execute(
            "create table fct_audit_comparisons as select ? as from_audit_id, ? as to_audit_id, 't2t' as modality, "
            "8 as probe_rows_before, 8 as probe_rows_after, 8 as common_rows, 0 as rows_only_before, 0 as rows_only_after, "
            "['singular'] as settings_before, ['singular'] as settings_after, ['singular'] as common_settings, "
            "4 as descriptors_before, 4 as descriptors_after, 4 as common_descriptors, [] :: varchar[] as descriptors_only_before, "
            "[] :: varchar[] as descriptors_only_after, ['a'] as letters_before, ['a'] as letters_after, [1, 2] as runs_before, "
            "[1, 2] as runs_after, [1, 2] as common_runs, 8 as parsed_both, 0 as parsed_before_only, 0 as parsed_after_only, "
            "0 as parsed_neither, 1.0 as parse_rate_before, 1.0 as parse_rate_after, 1.0 as parse_change_p, "
            "4 as documents_compared, 2.0 as median_doc_length_before, 2.0 as median_doc_length_after, 0.5 as typical_share, "
            "0.05 as significance_level, 0.8 as detectable_power, 2.8 as detectable_h, "
            "null :: double as detectable_share_below, null :: double as detectable_share_above",
            [FROM, TO],
        )
    return dora_home


def test_diff_counts_a_descriptor_in_each_of_its_dimensions(two_audits):
    from analytics.diff import audit_diff

    diff = audit_diff("m", family="biasdora")
    by_dim = {r[1]: r[2:] for r in diff.by_dimension}
    # (compared, significant changes, direction, min change q, significant before, after)
    assert by_dim == {
        "age": (1, 1, "weaker", 0.02, 1, 0),
        "nationality": (2, 1, "stronger", 0.01, 1, 2),
        "race-color": (2, 1, "stronger", 0.01, 1, 2),
        "physical-appearance": (0, 0, "no detectable change", None, 0, 0),
    }
    # the same count per dimension as a query on the per-dimension bridge
    assert {d: v[5] for d, v in by_dim.items()} == _per_dimension_query(TO)
    assert {d: v[4] for d, v in by_dim.items()} == _per_dimension_query(FROM)
    text = diff.text()
    assert "t2t race-color: 1 of 2 changed significantly: stronger (min change q 1.00e-02); significant associations 1 -> 2" in text
    assert "t2t physical-appearance: 0 of 0 changed significantly: no detectable change (min change q n/a)" in text
    # the top changes list greek under both of its dimensions
    listed = [(r[0], r[4]) for r in diff.top.rows]
    assert listed == [("age", "slow"), ("nationality", "greek"), ("race-color", "greek")]


# ------------------------------------------------------------------ formatting and discovery (no warehouse)


def test_q_values_are_never_rounded_across_the_cut_off():
    assert format_q(0.0498) == "4.98e-02" and format_q(0.05) == "5.00e-02" and format_q(3.2e-7) == "3.20e-07"
    assert format_q(None) == "n/a" and format_q(float("nan")) == "n/a"
    from analytics.query import QueryResult, format_result

    table = format_result(QueryResult(["word", "tfidf", "fisher_q"], [("slow", 5.78767, 0.049996)]))
    assert table.splitlines()[-1].split() == ["slow", "5.788", "5.00e-02"]  # .4g alone would print 0.05


def test_dora_tables_lists_every_documented_mart_by_family(capsys, dora_home):
    from analytics.catalog import relations
    from orchestration.cli import main

    models = Path(__file__).resolve().parent.parent / "dbt_project" / "models"
    marts = {p.stem: p.parts[-2] for p in models.glob("marts/*/*.sql")}
    assert main(["tables"]) == 0
    out = capsys.readouterr().out
    listed, family = {}, None
    for line in out.splitlines():
        if re.match(r"^[a-z ]+:$", line):
            family = line[:-1]
        elif m := re.match(r"^  ([a-z0-9_]+): (.+)$", line):
            listed[m.group(1)] = family
            assert "PUBLIC" not in m.group(2) and len(m.group(2)) <= 150
    # every mart, under its family, nothing else; the audits of every family first, as shared
    assert out.startswith("shared by every family:\n  dim_audits: ")
    assert listed == {**marts, "dim_audits": "shared by every family"}
    assert not any(r.name.startswith(("stg_", "int_")) for r in relations() if r.is_public)

    assert main(["tables", "fct_association_dimensions"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("  bias_dimension "))
    assert "CrowS-Pairs bias type" in line and "[" not in line  # its description; no type (no warehouse here)
    assert main(["tables", "fct_association_dimension"]) == 2
    assert "did you mean fct_association_dimensions" in capsys.readouterr().err


def test_query_help_points_at_the_discovery_commands(capsys, dora_home):
    from orchestration.cli import main

    with pytest.raises(SystemExit):
        main(["query", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "dora tables" in out and "SHOW TABLES" in out and "DESCRIBE <table>" in out


def test_index_links_every_page_the_report_writes(finished_audit, monkeypatch, tmp_path, capsys):
    """Every HTML page written is reachable from index.html, every PNG is shown on a page."""
    from orchestration.cli import main

    finished_audit.env(monkeypatch)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))  # main() writes dagster.yaml there, not in the shared home
    out = tmp_path / "report"
    assert main(["report", "--out", str(out)]) == 0
    written = capsys.readouterr().out
    assert "vlstereoset.html" in written  # a family page of its own, beside index.html
    pages = {p.relative_to(out).as_posix() for p in out.rglob("*.html")}
    reached, todo, shown = set(), ["index.html"], set()
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        text = (out / page).read_text(encoding="utf-8")
        base = Path(page).parent
        todo += [os.path.normpath(base / href) for href in re.findall(r"href=['\"]([^'\"#]+)", text)]
        shown |= {os.path.normpath(base / src) for src in re.findall(r"<img src=['\"]([^'\"]+)", text)}
    assert pages <= reached, f"pages no link leads to: {sorted(pages - reached)}"
    assert {p.relative_to(out).as_posix() for p in out.glob("*.png")} <= shown

"""End to end: the ModSCAN text analogues (docs/families/modscan.md#text-only-use, NOT FROM PAPER) on the embedded
SmolLM2-135M through the Dagster asset (in the session's finished audit), then the dbt modscan
marts on the landed rows."""

import dagster as dg
import duckdb
import pytest

from ingestion.landing import read_landing
from orchestration.defs.modscan.assets import modscan_responses
from tests.helpers.homes import MODSCAN_CONFIG as TINY  # the finished audit ran exactly this


def _materialize(config: dict) -> dict:
    result = dg.materialize([modscan_responses], run_config={"ops": {"modscan_responses": {"config": config}}})
    assert result.success
    (mat,) = result.asset_materializations_for_node("modscan_responses")
    return {k: v.value for k, v in mat.metadata.items()}


@pytest.mark.slow
def test_text_analogues_land_and_fill_the_bias_marts(finished_audit, tmp_path, monkeypatch):
    """The session's finished audit (tests/helpers/homes.py) ran the asset with ``TINY`` in the
    audit job, and the job's dbt build filled the modscan marts; read-only here."""
    finished_audit.env(monkeypatch)
    assert finished_audit.run_config["ops"]["modscan_responses"]["config"] == TINY
    first = finished_audit.metadata[("landing", "modscan_responses")]
    # persona: 1 trait x 2 attributes x 2 conditions; faces: 3 scenarios x 1 instance x 2 attributes
    assert first["rows_planned"] == 10 and first["rows_generated"] == 10
    rows = read_landing("modscan_responses").to_pylist()
    assert len(rows) == 10
    for r in rows:
        assert r["probe"] in ("modscan_text_persona", "modscan_text_faces") and r["modality"] == "text"
        assert r["model_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and r["model_version"].startswith("gguf-")
        assert r["raw_output"] is not None and r["status"] != "error" and "NOT FROM PAPER" in r["deviation"]
        assert (r["status"] == "ok") == (r["chosen_group"] is not None)
        if r["probe"] == "modscan_text_faces":
            assert r["left_group"] and r["right_group"] and r["term_order"] is None
        else:
            assert sorted(r["term_order"].split("|")) in (["female", "male"], ["Asian", "Black", "Indian", "White"])

    with duckdb.connect(str(finished_audit.home / "warehouse.duckdb"), read_only=True) as con:
        n_fct = con.execute("select count(*) from fct_modscan_responses").fetchone()[0]
        cells = con.execute("select probe, attribute, scenario, condition, n_queries, s_bias, s_bias_max from agg_modscan_bias_scores").fetchall()
    assert n_fct == 10
    assert len(cells) == 2 * 2 + 2 * 3  # text_persona: 2 attributes x 2 conditions; text_faces: 2 x 3 scenarios
    assert sum(c[4] for c in cells) == 10
    assert all(0 <= c[5] <= c[6] for c in cells)
    # what dora audit prints and the dora report section (read-only, from the mart; the
    # heatmap goes to a folder of this test's, not into the shared home)
    from analytics.modscan import report_section, summary_text

    assert "modscan_text_faces" in summary_text(first["audit_id"])
    section = report_section(None, tmp_path)
    assert section.count("<tr>") == 1 + len(cells)
    assert (tmp_path / "modscan_race_pairwise.png").exists() and "modscan_race_pairwise.png" in section


@pytest.mark.slow
def test_text_analogues_resume_and_a_disabled_run_skips(finished_audit, tmp_path, monkeypatch):
    """On a copy of the finished home: everything landed, so no model call; disabled: skipped."""
    from tests.helpers.homes import copy_home

    finished_audit.env(monkeypatch, copy_home(finished_audit, tmp_path / "home"))
    again = _materialize(TINY)  # resumable: everything landed, no model call
    assert again["rows_generated"] == 0 and again["rows_already_landed"] == 10
    assert _materialize({**TINY, "enabled": False})["status"] == "skipped"  # dora audit --family <other family>

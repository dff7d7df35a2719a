"""The family seam: a fifth family (``tests/toy_family``, a fixture never shipped) added by its
own homes plus one entry in ``FAMILIES`` is picked up by ``dora audit --probe``, ``dora audit
--dry-run``, ``dora diff --family``, ``dora families`` and the Dagster definitions."""

from __future__ import annotations

import duckdb
import pytest

from orchestration import families as fam
from orchestration.cli import main


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """FAMILIES + the toy family; its landing table in the landing contract; a fresh DORA_HOME."""
    from ingestion.landing import SCHEMAS
    from tests.toy_family.assets import SCHEMA, TABLE
    from orchestration.definitions import defs
    from tests.toy_family.family import FAMILY

    # the shipped definitions resolve lazily (and cache what they resolved): resolve them before
    # FAMILIES holds the toy, so no later test sees a toy asset in them
    defs.resolve_asset_graph()
    monkeypatch.setattr(fam, "FAMILIES", (*fam.FAMILIES, FAMILY))
    monkeypatch.setitem(SCHEMAS, TABLE, SCHEMA)
    monkeypatch.setenv("DORA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home" / "dagster"))
    return tmp_path / "home"


def test_families_command_lists_every_family(toy, capsys):
    assert main(["families"]) == 0
    out = capsys.readouterr().out
    for family in fam.FAMILIES:
        assert f"{family.name}: {family.title}" in out and f"Dagster group: {family.groups[0]}" in out
    assert "landing tables: toy_rows" in out and "marts: fct_toy_rows, fct_toy_change_tests" in out
    assert main(["families", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "family,group,flags,landing_tables,marts,title"


@pytest.mark.slow  # the BiasDora plan extracts CrowS-Pairs descriptors with spaCy (~6 s)
def test_dry_run_plans_every_family(toy, capsys):
    assert main(["audit", "--dry-run", "--toy-rows", "4"]) == 0
    out = capsys.readouterr().out
    for name in ("t2t ", "counterfactual:", "modscan:", "vlstereoset:", "toy: 4 rows of 'alpha' on toy-model"):
        assert name in out, out
    assert main(["audit", "--dry-run", "--probe", "toy"]) == 0
    assert capsys.readouterr().out.strip() == "toy: 3 rows of 'alpha' on toy-model"


def test_toy_flags_come_from_its_config(toy, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["audit", "--toy-rows", "51"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "dora audit: error: argument --toy-rows: 51 is out of range: expected 1..50")
    with pytest.raises(SystemExit):
        main(["audit", "--help-family", "toy"])
    out = capsys.readouterr().out
    assert "--toy-rows TOY_ROWS" in out and "rows to land (default: 3)" in out and "{alpha,beta,gamma}" in out


def test_diff_family_reads_the_toys_change_test(toy, capsys):
    toy.mkdir(parents=True)
    with duckdb.connect(str(toy / "warehouse.duckdb")) as con:
        con.execute("create table fct_toy_rows as select * from (values ('a1', 'toy-model', 'v1', timestamp '2026-01-01'),"
                    " ('a2', 'toy-model', 'v2', timestamp '2026-01-02')) t(audit_id, model_id, model_version, landed_at)")
        con.execute("create table fct_toy_change_tests as select 'a1' as from_audit_id, 'a2' as to_audit_id, 'alpha' as word,"
                    " 3 as value_before, 9 as value_after, 0.01 as change_p, 0.02 as change_q,"
                    " true as is_significant_change, 'increased' as change_type")
    assert main(["diff", "toy-model", "--family", "toy"]) == 0
    out = capsys.readouterr().out
    assert "dora diff --family toy toy-model: a1 (version v1) -> a2 (version v2)" in out
    assert "1 of 1 compared rows changed significantly" in out and "increased 1" in out


def test_audit_probe_toy_runs_only_the_toy_group(toy, monkeypatch, capsys):
    """In process: the Dagster definitions are rebuilt from FAMILIES; --probe toy runs the toy's
    asset only (no model, no dbt), and the toy's summary is printed."""
    import orchestration.definitions as definitions
    from ingestion.landing import read_landing

    defs = definitions.build_definitions()
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert "landing/toy_rows" in keys and "landing/t2t_completions" in keys
    monkeypatch.setattr(definitions, "defs", defs)
    assert main(["audit", "--probe", "toy", "--toy-rows", "4", "--toy-word", "beta", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "toy: audit toy-toy-model-beta: 4 rows landed" in out
    assert "counterfactual" not in out and "modscan" not in out.lower()
    rows = read_landing("toy_rows").to_pylist()
    assert sorted(r["item"] for r in rows) == [0, 1, 2, 3] and {r["word"] for r in rows} == {"beta"}
    assert not (toy / "landing" / "t2t_completions").exists() or not any((toy / "landing" / "t2t_completions").rglob("*.parquet"))
    # the toy names its model with a flag of its own (--toy-model): the run carries the launch's
    # dora tags but is no partition of the --model model (`adhoc:<model>@<version>` is for those)
    from dagster import DagsterInstance

    with DagsterInstance.get() as instance:
        (run,) = instance.get_runs(limit=1)
        assert instance.get_dynamic_partitions("audit_versions") == []
    assert "dagster/partition" not in run.tags and "dora/model" not in run.tags
    assert {k: run.tags[k] for k in ("dora/family", "dora/target", "dora/trigger")} == {
        "dora/family": "toy", "dora/target": "(ad hoc)", "dora/trigger": "cli"}


def test_every_record_matches_the_dagster_definitions():
    """Each family's op names are ops of the audit job, its group holds assets, and its
    landing tables are in the landing contract."""
    from ingestion.landing import SCHEMAS
    from orchestration.definitions import defs
    from orchestration.instance import AUDIT_JOB

    job = defs.resolve_job_def(AUDIT_JOB)
    ops = {node.name for node in job.graph.node_defs}
    graph = defs.resolve_asset_graph()
    groups = {graph.get(k).group_name for k in graph.get_all_asset_keys()}
    for family in fam.FAMILIES:
        assert set(family.configs) <= ops, family.name
        assert family.group in groups, family.name
        assert set(family.landing_tables) <= set(SCHEMAS), family.name

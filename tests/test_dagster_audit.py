"""A real Dagster materialisation of every asset on a tiny sample (the session's finished audit,
tests/helpers/homes.py), with dbt tests as checks; a rerun of the whole job and another T2T
selection (the probe and the association models only) on a copy."""

import pytest


@pytest.mark.slow
def test_audit_job_materialises_every_asset(finished_audit, monkeypatch):
    """The session's finished audit (tests/helpers/homes.py: the audit job, every asset, 72 T2T rows)."""
    from analytics.query import execute_query
    from orchestration.definitions import defs

    finished_audit.env(monkeypatch)
    materialised = finished_audit.materialised
    expected = {tuple(k.path) for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert expected <= materialised, expected - materialised
    for key in [("landing", "t2t_completions"), ("stg_t2t_completions",), ("fct_associations",)]:
        assert key in materialised
    checks = finished_audit.checks
    assert len(checks) >= 20 and all(passed for _key, _name, passed in checks)
    t2t = finished_audit.metadata[("landing", "t2t_completions")]
    assert t2t["rows_generated"] == 9 * 2 * 2 * 2  # 9 dimensions x 2 settings x 2 letters x 2 runs
    rows = execute_query("select count(*), count(distinct bias_dimension) from stg_t2t_completions").rows[0]
    assert rows == (72, 9)
    n_assoc = execute_query("select count(*) from fct_associations").rows[0][0]
    ok_words = execute_query("select count(distinct (setting, descriptor, word)) from stg_t2t_completions where parse_status = 'ok'").rows[0][0]
    assert n_assoc == ok_words > 0


@pytest.mark.slow
def test_skipped_probes_say_so_and_the_audit_log_tags_the_run(finished_audit):
    """No T2I / I2T model is named: both probes report `skipped` (and the dbt build downstream of
    them still ran); the audit log lists the run's audits, which tag the run, a partition of the model."""
    md = finished_audit.metadata
    for key in [("landing", "t2i_images"), ("landing", "i2t_descriptions")]:
        assert md[key]["status"] == "skipped" and md[key]["skipped"] is True and md[key]["rows_generated"] == 0, key
        assert md[key]["reason"] == "no model configured", key
    assert ("stg_t2i_images",) in finished_audit.materialised and ("fct_associations",) in finished_audit.materialised
    log = md[("landing", "audits")]
    ids = log["audit_ids"].split(",")
    assert md[("landing", "t2t_completions")]["audit_id"] in ids and md[("landing", "counterfactual_responses")]["audit_id"] in ids
    from orchestration.families import family_names

    assert log["families"] == ",".join(family_names()) and log["audits_in_run"] == len(ids)
    tags = finished_audit.run_tags
    assert tags["dora/audit_id"] == log["audit_ids"] and tags["dagster/partition"] == finished_audit.partition
    assert finished_audit.partition == f"adhoc:smollm2-135m@{tags['dora/model_version']}"
    assert (tags["dora/target"], tags["dora/trigger"], tags["dora/model"]) == ("(ad hoc)", "cli", "smollm2-135m")


@pytest.mark.slow
def test_rerun_is_a_no_op_and_another_selection_is_another_audit(finished_audit, tmp_path, monkeypatch):
    """The same audit again (the whole job) on a copy of the finished home: nothing generated,
    nothing rebuilt, the dbt tests' outcomes reported again; one more letter is another audit
    (the audit identity covers the selection) whose rows all land, generated again for the
    letters already landed too, and rebuild the association marts while the descriptors stay."""
    import dagster as dg
    from dagster import DagsterInstance

    from analytics.query import execute_query
    from orchestration.definitions import AUDIT_JOB, defs
    from orchestration.defs.dbt.assets import dora_dbt_models
    from tests.helpers.homes import T2T_CONFIG, copy_home

    home = finished_audit.env(monkeypatch, copy_home(finished_audit, tmp_path / "home"))
    first = finished_audit.metadata[("landing", "t2t_completions")]
    job = defs.resolve_job_def(AUDIT_JOB)
    with DagsterInstance.ephemeral() as instance:
        warehouse = home / "warehouse.duckdb"
        built_at = warehouse.stat().st_mtime_ns
        again = job.execute_in_process(run_config=finished_audit.run_config, instance=instance)
        assert again.success
        md2 = {tuple(e.materialization.asset_key.path): e.materialization.metadata for e in again.get_asset_materialization_events()}
        assert md2[("landing", "t2t_completions")]["rows_generated"].value == 0
        assert md2[("landing", "t2t_completions")]["rows_already_landed"].value == 72
        assert md2[("landing", "t2t_completions")]["audit_id"].value == first["audit_id"]
        # nothing new landed: descriptor extraction and both dbt builds are skipped, the
        # warehouse file is not touched, and the dbt tests' outcomes are reported again
        for key in [("landing", "descriptors"), ("stg_t2t_completions",), ("fct_associations",), ("fct_association_scores",)]:
            assert "skipped" in md2[key], key
        assert warehouse.stat().st_mtime_ns == built_at
        checks2 = [e for e in again.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
        assert len(checks2) == len(finished_audit.checks) and all(e.event_specific_data.passed for e in checks2)
        assert execute_query("select count(*) from stg_t2t_completions").rows[0][0] == 72

        # one more letter: another selection, so another audit (the audit identity
        # covers the selection): its 108 rows land and the warehouse is rebuilt. Only the T2T
        # probe, the descriptors, the audit log and the dbt models up to fct_associations run:
        # the other families would only repeat the no-op above, and building the score models
        # and the project's other models (~20 s of CPU together) asserts nothing more here
        graph = defs.resolve_asset_graph()
        to_associations = dg.AssetSelection.assets("fct_associations").upstream() & dg.AssetSelection.assets(dora_dbt_models)
        t2t_assets = {dg.AssetKey(["landing", name]) for name in ("descriptors", "descriptor_rows", "t2t_completions", "audits")}
        more_config = {"ops": {"t2t_completions": {"config": {**T2T_CONFIG, "letters": "bmz"}}}}
        more = job.execute_in_process(run_config=more_config, instance=instance, asset_selection=sorted(to_associations.resolve(graph) | t2t_assets))
        assert more.success
        md3 = {tuple(e.materialization.asset_key.path): e.materialization.metadata for e in more.get_asset_materialization_events()}
        assert md3[("landing", "t2t_completions")]["rows_generated"].value == 108
        assert md3[("landing", "t2t_completions")]["audit_id"].value != md2[("landing", "t2t_completions")]["audit_id"].value
        assert "skipped" not in md3[("fct_associations",)] and "skipped" in md3[("landing", "descriptors")]
        assert execute_query("select count(*) from stg_t2t_completions").rows[0][0] == 72 + 108


@pytest.mark.slow
def test_yaml_descriptions_reach_the_warehouse_as_comments(finished_audit):
    """persist_docs (dbt_project.yml): a model's YAML description and its columns' are the
    DuckDB comments of the relation, a table (fct_associations) and a view (the bridge) alike;
    row-per-association marts carry the list of dimensions, not a first-of-list column."""
    import duckdb

    con = duckdb.connect(str(finished_audit.home / "warehouse.duckdb"), read_only=True)
    try:
        comments = dict(
            con.execute(
                "select table_name || '.' || column_name, comment from duckdb_columns() "
                "where table_name in ('fct_associations', 'fct_association_dimensions')"
            ).fetchall()
        )
        relations = dict(
            con.execute(
                "select table_name, comment from duckdb_tables() where table_name = 'fct_associations' "
                "union all select view_name, comment from duckdb_views() where view_name = 'fct_association_dimensions'"
            ).fetchall()
        )
    finally:
        con.close()
    assert comments["fct_associations.tf"].startswith("Term frequency tf(d,w)")
    assert comments["fct_association_dimensions.bias_dimension"].startswith("One CrowS-Pairs bias type")
    assert [c for c, text in comments.items() if not text] == []
    assert relations["fct_associations"].startswith("One row per association (audit_id, modality, setting, descriptor, word)")
    assert relations["fct_association_dimensions"].startswith("The association -> bias dimension bridge")
    assert "fct_associations.bias_dimensions" in comments and "fct_associations.bias_dimension" not in comments


def test_definitions_load_and_lineage():
    from orchestration.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = {"/".join(k.path) for k in graph.get_all_asset_keys()}
    for name in ["landing/crows_pairs", "landing/descriptors", "landing/t2t_completions", "stg_t2t_completions", "fct_associations"]:
        assert name in keys
    import dagster as dg

    up = graph.get(dg.AssetKey("stg_t2t_completions")).parent_keys
    assert dg.AssetKey(["landing", "t2t_completions"]) in up
    assert dg.AssetKey(["landing", "descriptors"]) in graph.get(dg.AssetKey(["landing", "t2t_completions"])).parent_keys
    checks = list(graph.asset_check_keys)
    assert any(c.asset_key == dg.AssetKey("fct_associations") for c in checks)

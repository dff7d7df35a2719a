"""What the Dagster UI shows, checked on the definitions (fast; the browser test is
tests/test_ui_browser.py): one group per family and the shared group ``audits``, no cycle
between groups, the layer of every asset, the audit log's parents, ad-hoc partitions, the run
tags, the skipped-probe convention, the dbt checks' names and ``dora ui``'s flags."""

from __future__ import annotations

import graphlib
import re
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest

from orchestration import families as fam
from orchestration.definitions import defs  # imported at collection: the definitions take seconds

GRAPH = defs.resolve_asset_graph()
REPO = Path(__file__).resolve().parents[1]
#: every family's Dagster groups, from its record (a fifth family is iterated, never listed here)
FAMILY_GROUPS = {g for f in fam.FAMILIES for g in f.groups}


def _node(key: str):
    return GRAPH.get(dg.AssetKey.from_user_string(key))


def test_one_group_per_family_plus_audits_and_no_cycle_between_groups():
    groups = {GRAPH.get(k).group_name for k in GRAPH.get_all_asset_keys()}
    assert groups == FAMILY_GROUPS | {"audits"}
    assert {f.group for f in fam.FAMILIES} <= FAMILY_GROUPS and len(fam.FAMILIES) > 1
    edges: dict[str, set[str]] = {g: set() for g in groups}
    for key in GRAPH.get_all_asset_keys():
        node = GRAPH.get(key)
        edges[node.group_name] |= {GRAPH.get(p).group_name for p in node.parent_keys} - {node.group_name}
    order = list(graphlib.TopologicalSorter(edges).static_order())  # CycleError on a group-level cycle
    assert order[-1] == "audits" and edges["audits"] == FAMILY_GROUPS  # downstream of every family
    # dbt models join their family by folder; the readers of the audit log are shared
    assert _node("fct_modscan_responses").group_name == "modscan"
    assert _node("stg_counterfactual_responses").group_name == "counterfactual"
    assert {_node(k).group_name for k in ("stg_audits", "dim_audits", "fct_association_changes")} == {"audits"}
    assert _node("fct_associations").group_name == "biasdora"


def test_layer_is_a_kind_and_a_tag():
    from orchestration.defs.audits.assets import AUDITS_GROUP
    from orchestration.defs.dbt.assets import SHARED_GROUP

    assert SHARED_GROUP == AUDITS_GROUP
    layers = {}
    for key in GRAPH.get_all_asset_keys():
        node = GRAPH.get(key)
        layer = node.tags.get("dora/layer")
        assert layer in node.kinds, key
        layers[key.to_user_string()] = layer
    assert {k for k, v in layers.items() if v == "landing"} == {k.to_user_string() for k in GRAPH.get_all_asset_keys() if k.path[0] == "landing"}
    assert (layers["stg_t2t_completions"], layers["int_document_words"], layers["dim_audits"]) == ("staging", "intermediate", "marts")
    assert set(layers.values()) == {"landing", "staging", "intermediate", "marts"}
    assert _node("landing/t2t_completions").kinds == {"python", "parquet", "landing"}
    assert _node("fct_association_scores").kinds == {"dbt", "duckdb", "marts"}


def test_audit_log_has_every_familys_audit_producers_as_parents():
    log = _node("landing/audits")
    parents = {p.to_user_string() for p in log.parent_keys}
    for family in fam.FAMILIES:
        assert family.audit_assets and set(family.audit_assets) <= parents, family.name
    assert parents == {k for f in fam.FAMILIES for k in f.audit_assets}
    assert log.partitions_def is None  # runs in unpartitioned runs too (its parent, the T2T probe, is partitioned)
    assert [p.to_user_string() for p in _node("stg_audits").parent_keys] == ["landing/audits"]


def test_descriptions_are_for_analysts():
    for key in GRAPH.get_all_asset_keys():
        text = GRAPH.get(key).description or ""
        assert text.strip(), key
        for note in ("PUBLIC CONTRACT", "Raw SQL", "{#-", "issue "):
            assert note not in text, (key.to_user_string(), note)
    assert _node("dim_audits").description.endswith("SQL: `dbt_project/models/marts/audits/dim_audits.sql`.")


def test_probe_selection_takes_the_shared_assets_its_families_feed():
    from orchestration.cli.audit import _probe_selection

    modscan = {k.to_user_string() for k in _probe_selection(defs, ["modscan"])}
    assert {"landing/modscan_responses", "fct_modscan_responses", "landing/audits", "stg_audits"} <= modscan
    # dim_audits reads the audit log only (a family's figures of its audits are in its marts)
    assert "dim_audits" in modscan and "fct_associations" not in modscan and "agg_biasdora_audits" not in modscan
    biasdora = {k.to_user_string() for k in _probe_selection(defs, ["biasdora"])}
    assert {"landing/audits", "stg_audits", "dim_audits", "fct_association_changes", "agg_association_changes_by_dimension"} <= biasdora
    assert "landing/modscan_responses" not in biasdora


def test_adhoc_partition_keys_are_not_registry_targets():
    from ingestion.registry import adhoc_partition_key, is_adhoc_partition, partition_key
    from orchestration.defs.audits.runs import target_of_run

    key = adhoc_partition_key("smollm2-135m", "gguf-q4_1-0123456789ab")
    assert key == "adhoc:smollm2-135m@gguf-q4_1-0123456789ab" and is_adhoc_partition(key)
    assert not is_adhoc_partition(partition_key("smollm2-135m", "gguf-q4_1-0123456789ab"))
    # a run of an ad-hoc partition audits what its run config says: no registry read
    context = SimpleNamespace(run=SimpleNamespace(tags={"dagster/partition": key}, run_config={}))
    assert target_of_run(context, registry="/nonexistent/registry.yaml") is None


def test_adhoc_run_registers_the_partition_and_tags(tmp_path):
    from orchestration.defs.audits.runs import adhoc_run

    model = tmp_path / "weights.bin"
    model.write_bytes(b"\x00" * 10)  # sha256 of ten zero bytes: 01d448afd928...
    with dg.instance_for_test() as instance:
        key, tags = adhoc_run(instance, str(model), "transformers", ["biasdora", "modscan"])
        assert key == f"adhoc:{model}@sha256-01d448afd928"
        assert instance.get_dynamic_partitions("audit_versions") == [key]
        assert tags == {
            "dora/target": "(ad hoc)",
            "dora/model": str(model),
            "dora/model_version": "sha256-01d448afd928",
            "dora/trigger": "cli",
            "dora/family": "biasdora,modscan",
        }
        assert adhoc_run(instance, str(model), "transformers", ["biasdora"])[0] == key  # registered once
        assert instance.get_dynamic_partitions("audit_versions") == [key]


def test_audit_log_tags_fill_what_the_launch_left_out():
    from orchestration.defs.audits.assets import audit_tags, run_audit_ids

    assert run_audit_ids({"audit_id": "a1", "image_audit_id": "old", "vision_audit_id": "v1", "audit_ids": "s1,s2,a1", "rows_generated": 3}) == [
        "a1",
        "v1",
        "s1",
        "s2",
    ]
    events = [
        {"audit_id": "a1", "model_id": "M", "model_version": "v9", "target": None},
        {"audit_id": "s1", "model_id": "CLIP", "model_version": "c1", "target": None},
    ]
    launched = {"dora/target": "(ad hoc)", "dora/model": "smollm2-135m", "dora/trigger": "cli"}
    assert audit_tags(launched, events, ["biasdora", "vlstereoset"], "manual") == {
        "dora/audit_id": "a1,s1",
        "dora/family": "biasdora,vlstereoset",
        "dora/model_version": "v9,c1",
    }
    assert audit_tags({}, events[:1], ["biasdora"], "sensor") == {
        "dora/audit_id": "a1",
        "dora/family": "biasdora",
        "dora/model": "M",
        "dora/model_version": "v9",
        "dora/target": "(ad hoc)",
        "dora/trigger": "sensor",
    }
    long = audit_tags({}, [{"audit_id": "x" * 2500}], [], "cli")["dora/audit_id"]
    assert len(long) == 2000 and long.endswith("...")


def test_a_skipped_probe_says_so_first():
    from orchestration.defs.common import skipped_result

    result = skipped_result("no T2I model configured", how_to_enable="--t2i-model ...")
    assert result.metadata == {
        "status": "skipped",
        "skipped": True,
        "reason": "no T2I model configured",
        "rows_generated": 0,
        "how_to_enable": "--t2i-model ...",
    }
    assert skipped_result("x", asset_key=["landing", "a"], rows_key=None).metadata == {"status": "skipped", "skipped": True, "reason": "x"}


@pytest.mark.parametrize(
    "port,message",
    [("0", "0 is out of range: expected 1..65535"), ("70000", "70000 is out of range: expected 1..65535"), ("abc", "'abc' is not an integer")],
)
def test_dora_ui_port_is_checked_by_argparse(port, message, capsys):
    from orchestration.cli.parser import build_parser

    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["ui", "--port", port])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"dora ui: error: argument --port: {message}"


def test_dora_ui_help_gives_defaults():
    from orchestration.cli.parser import build_parser

    ui = build_parser()._subparsers._group_actions[0].choices["ui"]
    text = " ".join(ui.format_help().split())
    assert "TCP port the UI listens on, 1..65535 (default: 3000)" in text
    assert "(default: 127.0.0.1, this machine only)" in text


def test_counterfactual_runs_in_an_adhoc_partition_but_not_in_a_registry_one(tmp_path):
    """An ad-hoc audit's partition (``adhoc:<model>@<version>``) runs every selected family; a
    registry partition runs only its target's family."""
    from orchestration.defs.counterfactual.assets import _skip_reason
    from orchestration.defs.counterfactual.config import CounterfactualConfig

    registry = tmp_path / "registry.yaml"
    registry.write_text("targets:\n  - name: smol\n    family: biasdora\n    model: smollm2-135m\n    version: {source: explicit, value: v1}\n")
    run_config = {"ops": {"t2t_completions": {"config": {"registry": str(registry)}}}}

    def run(key):
        tags = {"dagster/partition": key} if key else {}
        return SimpleNamespace(run=SimpleNamespace(tags=tags, run_config=run_config), has_partition_key=False)

    config = CounterfactualConfig()
    assert _skip_reason(run("adhoc:smollm2-135m@gguf-q4_1-b179c9523d0e"), config) is None
    assert _skip_reason(run(None), config) is None
    assert _skip_reason(run("smol@v1"), config) == "partition smol@v1 audits registry target 'smol' of family 'biasdora'"


def test_dbt_checks_are_named_after_their_rules_and_described():
    """Every dbt test shows as asset checks a person can read (orchestration/defs/dbt/checks.py):
    a ``model_rules`` test as ``not_null``, ``unique_key`` and one check per row rule (as many
    as its YAML lists), dbt's own tests after their column; each named in ``[a-z0-9_]``, at
    most 64 characters, with a description."""
    import yaml

    from orchestration.defs.dbt.checks import UNIQUE_ID_KEY

    specs = [GRAPH.get_check_spec(k) for k in GRAPH.asset_check_keys]
    dbt_specs = [s for s in specs if s.metadata.get(UNIQUE_ID_KEY)]
    for spec in dbt_specs:
        assert re.fullmatch(r"[a-z0-9_]{1,64}", spec.name), spec.key
        assert (spec.description or "").strip(), spec.key
    # one check per not-null list, key and row rule of every model_rules test, as the YAML lists them
    expected = 0
    for path in (REPO / "dbt_project" / "models").rglob("*.yml"):
        for model in (yaml.safe_load(path.read_text()) or {}).get("models") or []:
            for test in model.get("data_tests") or []:
                if isinstance(test, dict) and "model_rules" in test:
                    args = test["model_rules"]["arguments"]
                    expected += bool(args.get("not_null")) + bool(args.get("unique")) + len(args.get("rules") or [])
    assert sum("model_rules" in s.metadata[UNIQUE_ID_KEY] for s in dbt_specs) == expected
    fct = {s.name: s for s in dbt_specs if s.asset_key == dg.AssetKey("fct_associations")}
    assert set(fct) == {
        "not_null",
        "unique_key",
        "fisher_q_ge_fisher_p",
        "is_significant_eq_fisher_q_lt_0_05",
        "modality_in_t2t_t2i_i2t",
        "tf_ge_1",
        "df_ge_1",
        "idf_ge_0",
        "tfidf_ge_0",
        "paper_p_value_between_0_and_1",
        "fisher_p_between_0_and_1",
        "fisher_q_between_0_and_1",
    }
    assert fct["fisher_q_ge_fisher_p"].description.startswith("Every row of `fct_associations` satisfies `fisher_q >= fisher_p`")
    assert fct["unique_key"].description.startswith(
        "No two rows of `fct_associations` share the key (`audit_id`, `modality`, `setting`, `descriptor`, `word`)"
    )
    assert fct["fisher_q_ge_fisher_p"].blocking
    dim = {s.name for s in dbt_specs if s.asset_key == dg.AssetKey("dim_audits")}
    assert {"unique_audit_id", "previous_audit_id_in_dim_audits", "not_null", "status_in_started_finished_failed"} <= dim

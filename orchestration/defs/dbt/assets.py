"""dbt models as Dagster assets; dbt tests become asset checks (dagster-dbt)."""


import graphlib
from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, dbt_assets

from ingestion.build_state import Fingerprint, is_unchanged, load_state, record_success
from ingestion.landing import check_warehouse, dora_home, quarantine_bad_shards, warehouse_path
from orchestration.defs.dbt.resources import dbt_project, dbt_project_files
from orchestration.instance import DBT_PROJECT_DIR, DUCKDB_WRITER_POOL, prepare_dbt_run

#: Build-state step names of the two dbt invocations (ingestion/build_state.py).
DBT_STEPS = ("dbt_dora_dbt_models", "dbt_dora_score_models")


class DoraDbtTranslator(DagsterDbtTranslator):
    """Groups dbt assets by their folder (staging / intermediate / marts); sources keep the
    default ``[source, table]`` keys, i.e. ``landing/<table>``, the Python assets' keys."""

    def get_asset_spec(self, manifest: Mapping[str, Any], unique_id: str, project) -> dg.AssetSpec:
        spec = super().get_asset_spec(manifest, unique_id, project)
        node = manifest.get("nodes", {}).get(unique_id) or {}
        fqn = node.get("fqn") or []
        if node.get("resource_type") in ("model", "seed", "snapshot") and len(fqn) > 2:
            spec = spec.replace_attributes(group_name=fqn[1])
        return spec


TRANSLATOR = DoraDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=True))


def dbt_inputs_fingerprint(step: str, selection: list[str], landing_tables: list[str]) -> Fingerprint:
    """What a ``dbt build`` reads: the shard listing (paths, sizes, mtimes) of the landing
    tables its models read, the dbt project's files, the selected assets and, for the score
    models, the last recorded state of the association models' build (they read its marts)."""
    fp = Fingerprint()
    for table in sorted(landing_tables):
        fp.add_tree(dora_home() / "landing" / table)  # labelled with the table's folder name
    for path in dbt_project_files():
        fp.add_file(path, label=f"dbt/{path.relative_to(DBT_PROJECT_DIR).as_posix()}")
    fp.add_value("selection", sorted(selection))
    if step != DBT_STEPS[0]:  # downstream of the association marts: rebuilt whenever they were
        fp.add_value(DBT_STEPS[0], (load_state(DBT_STEPS[0]) or {}).get("fingerprint"))
    return fp


def build_unless_unchanged(context: dg.AssetExecutionContext, dbt: DbtCliResource, step: str):
    """``dbt build`` of the selected models, skipped when nothing it reads has changed.

    A re-run of a finished audit lands no shard, so its warehouse is already what a build
    would make: the selected assets are then reported materialised with a ``skipped`` note
    (their tests ran on the same data last time) and dbt is not started. ``dora audit
    --rebuild`` (or deleting ``$DORA_HOME/state/``) forces the build.

    Yields:
        dagster-dbt events of the build, or one ``MaterializeResult`` per selected asset.
    """
    prepare_dbt_run()
    selection = [key.to_user_string() for key in context.selected_asset_keys]
    upstream = {dep for key in context.selected_asset_keys for dep in context.assets_def.asset_deps.get(key, ())}
    landing_tables = [dep.path[1] for dep in upstream if len(dep.path) == 2 and dep.path[0] == "landing"]
    # a corrupt warehouse is an error with its recovery (not 13 min of lock retries), and
    # shards that break their contract are quarantined before dbt's glob can union them in
    check_warehouse()
    for table in landing_tables:
        quarantine_bad_shards(table)
    fingerprint = dbt_inputs_fingerprint(step, selection, landing_tables)
    state = is_unchanged(step, fingerprint, outputs=[warehouse_path()])
    if state:
        note = f"nothing landed and no dbt model changed since the build of {state.get('recorded_at')}"
        context.log.info(f"dbt build skipped: {note}")
        selected = context.selected_asset_keys
        deps = {key: set(context.assets_def.asset_deps.get(key, ())) & selected for key in selected}
        for key in graphlib.TopologicalSorter(deps).static_order():  # Dagster wants upstream first
            yield dg.MaterializeResult(asset_key=key, metadata={"skipped": note})
        # the dbt tests ran on exactly this data in that build: report their outcomes again
        wanted = {(c.asset_key.to_user_string(), c.name) for c in context.selected_asset_check_keys}
        for check in state.get("metadata", {}).get("checks", []):
            if (check["asset_key"], check["check_name"]) in wanted:
                yield dg.AssetCheckResult(
                    asset_key=dg.AssetKey.from_user_string(check["asset_key"]),
                    check_name=check["check_name"],
                    passed=check["passed"],
                    severity=dg.AssetCheckSeverity(check["severity"]),
                    metadata={"reused": f"outcome of the dbt test in run {state['metadata'].get('run_id')} on the same data"},
                )
        return
    checks = []
    for event in dbt.cli(["build"], context=context).stream():
        if isinstance(event, dg.AssetCheckResult):
            checks.append(
                {
                    "asset_key": event.asset_key.to_user_string(),
                    "check_name": event.check_name,
                    "passed": event.passed,
                    "severity": event.severity.value,
                }
            )
        yield event
    record_success(step, fingerprint, {"run_id": context.run.run_id, "selected": len(selection), "checks": checks})


@dbt_assets(manifest=dbt_project().manifest_path, project=dbt_project(), dagster_dbt_translator=TRANSLATOR, pool=DUCKDB_WRITER_POOL, exclude="tag:scores")  # score marts: orchestration/defs/scoring/
def dora_dbt_models(context: dg.AssetExecutionContext, dbt: DbtCliResource):
    """``dbt build`` of the selected models: runs models, then their tests as asset checks.
    Skipped when nothing new landed (:func:`build_unless_unchanged`)."""
    yield from build_unless_unchanged(context, dbt, DBT_STEPS[0])

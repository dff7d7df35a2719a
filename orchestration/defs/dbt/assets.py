"""dbt models as Dagster assets; dbt tests become named asset checks (dagster-dbt, then
orchestration/defs/dbt/checks.py: one check per data rule)."""

import graphlib
from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, dbt_assets

from ingestion.build_state import (
    Fingerprint,
    full_refresh_requested,
    is_unchanged,
    load_state,
    record_success,
    recover_warehouse,
)
from ingestion.home import dbt_target_dir
from ingestion.landing import quarantine_bad_shards
from ingestion.landing_location import landing_root
from ingestion.warehouse import warehouse_path
from orchestration.defs.dbt.checks import named_check_events, named_check_specs
from orchestration.defs.dbt.resources import dbt_project, dbt_project_files
from orchestration.instance import DBT_PROJECT_DIR, DUCKDB_WRITER_POOL, prepare_dbt_run

#: Build-state step names of the two dbt invocations (ingestion/build_state.py).
DBT_STEPS = ("dbt_dora_dbt_models", "dbt_dora_score_models")


#: The dbt source of the audit log (every family's audit events): models reading it, directly or
#: through another model, are shared by the families (orchestration/defs/audits/assets.py).
AUDIT_LOG_SOURCE = "source.dora.landing.audits"
#: The shared Dagster group (``orchestration.defs.audits.assets.AUDITS_GROUP``; that module
#: imports Dagster assets of its own, so the name is repeated here and a test checks they agree).
SHARED_GROUP = "audits"


def audit_log_readers(manifest: Mapping[str, Any]) -> frozenset[str]:
    """The unique ids of the dbt nodes downstream of :data:`AUDIT_LOG_SOURCE` (dbt's ``child_map``)."""
    children = manifest.get("child_map") or {}
    seen, todo = set(), list(children.get(AUDIT_LOG_SOURCE, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(children.get(node, ()))
    return frozenset(seen)


class DoraDbtTranslator(DagsterDbtTranslator):
    """Where a dbt model shows in the Dagster UI.

    The project is laid out layer first (``models/<layer>/<folder>/``), so a model's dbt fqn is
    ``[project, layer, folder, ..., name]``.

    Group: its folder under the layer: a family's (``biasdora``, ``counterfactual``,
    ``modscan``, ``vlstereoset``) or ``audits``, the shared folder of ``stg_audits`` and
    ``dim_audits``, which is the shared group. A family's models that read the audit log
    through them (BiasDora's audit comparisons) join the shared group too: every family's
    probes feed the audit log, so a family group holding a reader of it would make the group
    graph circular (family -> audits -> family).

    Layer: the model's first folder (``staging``, ``intermediate``, ``marts``) as a kind (a
    badge on the graph node, next to ``dbt`` and ``duckdb``) and as the tag ``dora/layer``.
    Neither changes an asset key: a model's key is its name (dagster-dbt's default), a
    source's the default ``[source, table]``, i.e. ``landing/<table>``, the Python assets' keys.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._readers: tuple[int, frozenset[str]] | None = None

    def _audit_log_readers(self, manifest: Mapping[str, Any]) -> frozenset[str]:
        if self._readers is None or self._readers[0] != id(manifest):
            self._readers = (id(manifest), audit_log_readers(manifest))
        return self._readers[1]

    def get_description(self, dbt_resource_props: Mapping[str, Any]) -> str:
        """The model's documented description (its YAML) and where its SQL is; dagster-dbt's
        default appends the raw SQL, whose comments are notes for the people who change it."""
        text = " ".join((dbt_resource_props.get("description") or "").split())
        path = dbt_resource_props.get("original_file_path")
        if not text:
            return super().get_description(dbt_resource_props)
        return f"{text}\n\nSQL: `dbt_project/{path}`." if path else text

    def get_asset_spec(self, manifest: Mapping[str, Any], unique_id: str, project) -> dg.AssetSpec:
        spec = super().get_asset_spec(manifest, unique_id, project)
        node = manifest.get("nodes", {}).get(unique_id) or {}
        fqn = node.get("fqn") or []
        if node.get("resource_type") in ("model", "seed", "snapshot") and len(fqn) > 3:
            layer, folder = fqn[1], fqn[2]
            group = SHARED_GROUP if unique_id in self._audit_log_readers(manifest) else folder
            spec = spec.replace_attributes(group_name=group).merge_attributes(kinds={layer}, tags={"dora/layer": layer})
        return spec


TRANSLATOR = DoraDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=True))


def dora_dbt_assets(*, name: str | None = None, select: str = "fqn:*", exclude: str | None = None):
    """``@dbt_assets`` of the project's models in ``select`` minus ``exclude`` (dbt selection
    syntax), with :data:`TRANSLATOR`, in the pool :data:`DUCKDB_WRITER_POOL`, whose dbt tests
    are named checks: dagster-dbt's one check per test replaced by
    :func:`orchestration.defs.dbt.checks.named_check_specs` (a ``model_rules`` test: one check
    per rule). The decorated function streams them with :func:`build_unless_unchanged`.

    Returns:
        A decorator making a ``dg.AssetsDefinition`` (a multi-asset: dagster-dbt's asset specs,
        op tags and subsetting, the named check specs).
    """
    from dagster_dbt.dbt_manifest import validate_manifest

    def decorate(fn) -> dg.AssetsDefinition:
        base = dbt_assets(
            manifest=dbt_project().manifest_path,
            project=dbt_project(),
            dagster_dbt_translator=TRANSLATOR,
            pool=DUCKDB_WRITER_POOL,
            select=select,
            exclude=exclude,
            name=name,
        )(fn)
        manifest = validate_manifest(dbt_project().manifest_path)
        return dg.multi_asset(
            name=base.op.name,
            specs=list(base.specs),
            check_specs=named_check_specs(manifest, base.check_specs),
            can_subset=True,
            op_tags=base.op.tags,
            pool=DUCKDB_WRITER_POOL,
            allow_arbitrary_check_specs=True,
        )(fn)

    return decorate


def dbt_inputs_fingerprint(step: str, selection: list[str], landing_tables: list[str]) -> Fingerprint:
    """What a ``dbt build`` reads: the shard listing (paths, sizes, mtimes) of the landing
    tables its models read, the dbt project's files, the selected assets and, for the score
    models, the last recorded state of the association models' build (they read its marts)."""
    fp = Fingerprint()
    for table in sorted(landing_tables):
        fp.add_tree(landing_root() / table)  # labelled with the table's folder name (local or object storage)
    for path in dbt_project_files():
        fp.add_file(path, label=f"dbt/{path.relative_to(DBT_PROJECT_DIR).as_posix()}")
    fp.add_value("selection", sorted(selection))
    if step != DBT_STEPS[0]:  # downstream of the association marts: rebuilt whenever they were
        fp.add_value(DBT_STEPS[0], (load_state(DBT_STEPS[0]) or {}).get("fingerprint"))
    return fp


def missing_relations(context: dg.AssetExecutionContext) -> list[str]:
    """The selected dbt models (tables, views, incremental models) that the warehouse lacks.

    A recorded fingerprint says what the last build read, not that its output still exists:
    the warehouse may have been deleted or replaced since (the landing zone is the source of
    truth), or built by a run that selected other models.
    """
    from analytics.query import WarehouseMissingError, connect_read_only

    wanted = {}
    for key in context.selected_asset_keys:
        spec = context.assets_def.specs_by_key.get(key)
        metadata = spec.metadata if spec is not None else {}
        table_name = metadata.get("dagster/table_name")
        if table_name and metadata.get("dagster-dbt/materialization_type") != "ephemeral":
            wanted[tuple(str(table_name).lower().split(".")[-2:])] = key.to_user_string()
    if not wanted:
        return []
    try:
        con = connect_read_only()
    except WarehouseMissingError:
        return sorted(wanted.values())
    try:
        present = {
            (schema.lower(), name.lower())
            for schema, name in con.execute("select table_schema, table_name from information_schema.tables").fetchall()
        }
    finally:
        con.close()
    return sorted(name for relation, name in wanted.items() if relation not in present)


def build_unless_unchanged(context: dg.AssetExecutionContext, dbt: DbtCliResource, step: str):
    """``dbt build`` of the selected models, skipped when nothing it reads has changed.

    A re-run of a finished audit lands no shard, so its warehouse is already what a build
    would make: the selected assets are then reported materialised with a ``skipped`` note
    (their tests ran on the same data last time) and dbt is not started. The build runs when
    a selected model is missing from the warehouse (:func:`missing_relations`); a corrupt
    warehouse is moved aside and rebuilt (:func:`ingestion.build_state.recover_warehouse`);
    ``dora audit --rebuild`` makes it a full refresh of every selected model (kept until one
    succeeds); deleting ``$DORA_HOME/state/`` forces the build.

    Yields:
        dagster-dbt events of the build, each dbt test's outcome as its named checks
        (:func:`orchestration.defs.dbt.checks.named_check_events`); or one ``MaterializeResult``
        per selected asset and the recorded check outcomes.

    Raises:
        DagsterDbtCliRuntimeError: dbt failed (after every event, the failing checks' included).
    """
    prepare_dbt_run()
    selection = [key.to_user_string() for key in context.selected_asset_keys]
    upstream = {dep for key in context.selected_asset_keys for dep in context.assets_def.asset_deps.get(key, ())}
    landing_tables = [dep.path[1] for dep in upstream if len(dep.path) == 2 and dep.path[0] == "landing"]
    # a corrupt or deleted warehouse is rebuilt from landing (runs not started by `dora audit`, which
    # recovers it before the run and prints the notice, e.g. from the UI); unusable shards are
    # quarantined before dbt's glob can union them in (or block on a FIFO)
    for notice in recover_warehouse(DBT_STEPS):
        context.log.warning(notice)
    for table in landing_tables:
        quarantine_bad_shards(table)
    fingerprint = dbt_inputs_fingerprint(step, selection, landing_tables)
    full_refresh = full_refresh_requested(step)
    state = None if full_refresh else is_unchanged(step, fingerprint, outputs=[warehouse_path()])
    missing = missing_relations(context) if state else []
    if missing:
        context.log.info(f"dbt build runs: {len(missing)} selected model(s) missing from the warehouse, e.g. {missing[0]}")
        state = None
    if state:
        yield from _skipped_build(context, state)
        return
    checks = []
    if full_refresh:  # `dora audit --rebuild`: every incremental model recomputed from the landing zone
        context.log.info("dbt build --full-refresh: a rebuild was requested")
    # dbt unit tests check the SQL's logic on fixed inputs, not the audit's data: they run in the
    # test suite (tests/test_associations_sql.py builds with them), not in every audit's build,
    # as dbt advises for production runs (they were ~a quarter of each build's time)
    args = ["build", "--exclude-resource-type", "unit_test", *(["--full-refresh"] if full_refresh else [])]
    # one stable target folder per home and step (ingestion.home.dbt_target_dir): the next
    # build of this home re-parses only what changed, and no run leaves a folder in the project
    target = dbt_target_dir(context.op_execution_context.op.name)
    invocation = dbt.cli(args, target_path=target, context=context, raise_on_error=False)
    for event in named_check_events(invocation, context):  # each dbt test's outcome as its named checks
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
    error = invocation.get_error()
    if error is not None:
        raise error
    record_success(step, fingerprint, {"run_id": context.run.run_id, "selected": len(selection), "checks": checks})


def _skipped_build(context: dg.AssetExecutionContext, state: dict):
    """A skipped build's events: each selected asset materialised with a ``skipped`` note
    (upstream first), and the outcomes its dbt tests had on exactly this data in that build."""
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


@dora_dbt_assets(exclude="tag:scores")  # score marts: orchestration/defs/biasdora/scoring/
def dora_dbt_models(context: dg.AssetExecutionContext, dbt: DbtCliResource):
    """``dbt build`` of the selected models: runs models, then their tests as named asset checks.
    Skipped when nothing new landed (:func:`build_unless_unchanged`)."""
    yield from build_unless_unchanged(context, dbt, DBT_STEPS[0])

"""Dagster definitions for dora (``dagster dev -m orchestration.definitions``).

Only assembles: every probe family of :data:`orchestration.families.FAMILIES` gives its assets
and checks; the shared areas (``defs/dbt``, ``defs/audits``) add the dbt models, the audit log
asset, the audit checks, sensors and schedules. Adding a probe family touches nothing here.
Importing this module sets no environment variable and creates no folder (the dbt manifest is
parsed when stale).

What the UI shows: one asset group per family (its Python assets and its dbt models) and the
shared group ``audits`` (the audit log ``landing/audits``, whose parents are every family's
audit-producing assets, and the dbt models reading it: ``stg_audits``, ``dim_audits``, the
comparisons between audits). The layer is a kind and the tag ``dora/layer``: ``landing`` for
the Python assets (kinds ``python``, ``parquet``), ``staging`` / ``intermediate`` / ``marts``
for dbt models (kinds ``dbt``, ``duckdb``).

Lineage: landing/crows_pairs -> landing/descriptors -> landing/t2t_completions ->
stg_t2t_completions -> int_document_words -> int_association_counts -> fct_associations
(-> scoring -> fct_association_scores).
"""

from __future__ import annotations

import dagster as dg

from orchestration import families as fam
from orchestration.cluster import dora_executor
from orchestration.defs.audits.assets import build_audit_log_asset
from orchestration.defs.audits.batch_sensor import build_batch_sensor
from orchestration.defs.audits.checks import drift_asset_checks
from orchestration.defs.audits.schedules import build_reaudit_schedule
from orchestration.defs.audits.sensors import build_audit_version_sensor
from orchestration.defs.dbt.assets import dora_dbt_models
from orchestration.defs.dbt.resources import dbt_resource
from orchestration.instance import AUDIT_JOB

#: The layer of every Python (landing) asset, as a kind and the tag ``dora/layer``.
LANDING_LAYER = "landing"


def family_assets(family) -> list[dg.AssetsDefinition]:
    """``family``'s assets; its Python assets marked as the landing layer (kinds ``python``,
    ``parquet``, ``landing``; tag ``dora/layer``), its dbt models as the translator marks them."""

    def mark(spec: dg.AssetSpec) -> dg.AssetSpec:
        if "dbt" in spec.kinds:  # a family's own dbt assets (BiasDora's score marts)
            return spec
        return spec.merge_attributes(kinds={"python", "parquet", LANDING_LAYER}, tags={"dora/layer": LANDING_LAYER})

    return [a.map_asset_specs(mark) for a in family.assets()]


def build_definitions() -> dg.Definitions:
    """dora's Dagster definitions from the families of :data:`orchestration.families.FAMILIES`
    (read at call time): each family's assets and checks, the dbt models of every family
    (their Dagster group is their folder under the layer, i.e. the family's group; readers of the audit log
    are in the shared group ``audits``), the audit log asset (parents: every family's
    ``audit_assets``), every family's drift checks (versioned audits: collapse, change), the
    new-version sensor, the batch sensor (lands finished Batch API batches) and the re-audit schedule."""
    producers = {dg.AssetKey.from_user_string(k): f.name for f in fam.FAMILIES for k in f.audit_assets}
    assets = [*(a for family in fam.FAMILIES for a in family_assets(family)), dora_dbt_models, build_audit_log_asset(producers)]
    checks = [*drift_asset_checks(fam.FAMILIES), *(c for family in fam.FAMILIES for c in family.checks())]
    audit_job = dg.define_asset_job(
        AUDIT_JOB,
        selection=dg.AssetSelection.all(),
        executor_def=dora_executor,  # in_process / multiprocess (default) / celery (orchestration/cluster.py)
        description="Full audit: every probe family's probes and marts (BiasDora: CrowS-Pairs descriptors, probes, association and score marts).",
    )
    return dg.Definitions(
        assets=assets,
        jobs=[audit_job],
        resources={"dbt": dbt_resource()},
        asset_checks=checks,
        sensors=[build_audit_version_sensor(fam.FAMILIES), build_batch_sensor(fam.FAMILIES)],
        schedules=[build_reaudit_schedule(fam.FAMILIES)],
    )


defs = build_definitions()


def audit_job_for_multiprocess() -> dg.JobDefinition:
    """The resolved audit job, for ``dagster.reconstructable`` (``dora audit --executor
    multiprocess`` or ``celery``): each step process (or Celery worker) re-imports this module
    and calls this function."""
    return defs.resolve_job_def(AUDIT_JOB)

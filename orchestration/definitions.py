"""Dagster definitions for dora (``dagster dev -m orchestration.definitions``).

Lineage: landing/crows_pairs -> landing/descriptors -> landing/t2t_completions ->
stg_t2t_completions -> int_document_words -> int_association_counts -> fct_associations.
"""

from __future__ import annotations

import dagster as dg

from orchestration.defs.audits.checks import audit_checks
from orchestration.defs.audits.schedules import build_reaudit_schedule
from orchestration.defs.audits.sensors import audit_version_sensor
from orchestration.defs.dbt.assets import dora_dbt_models
from orchestration.defs.dbt.resources import dbt_resource
from orchestration.defs.ingestion.assets import crows_pairs, descriptors
from orchestration.defs.scoring.assets import scoring_assets
from orchestration.defs.scoring.checks import judge_checks  # issue 15: judge parse rate
from orchestration.defs.t2t.assets import t2t_completions
from orchestration.defs.vision.assets import vision_assets

AUDIT_JOB = "dora_audit"

audit_job = dg.define_asset_job(
    AUDIT_JOB,
    selection=dg.AssetSelection.all(),
    description="Full audit: ingest CrowS-Pairs, extract descriptors, run the T2T probe, build the association marts.",
)

defs = dg.Definitions(
    assets=[crows_pairs, descriptors, t2t_completions, *vision_assets, dora_dbt_models, *scoring_assets],
    jobs=[audit_job],
    resources={"dbt": dbt_resource()},
    # versioned audits: new-version sensor, re-audit schedule, collapse checks (defs/audits/)
    asset_checks=[*audit_checks, *judge_checks],
    sensors=[audit_version_sensor],
    schedules=[build_reaudit_schedule()],
)


def audit_job_for_multiprocess() -> dg.JobDefinition:
    """The resolved audit job, for ``dagster.reconstructable`` (``dora audit --executor
    multiprocess``): each step process re-imports this module and calls this function."""
    return defs.resolve_job_def(AUDIT_JOB)

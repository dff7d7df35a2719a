"""Dagster definitions for dora (``dagster dev -m orchestration.definitions``).

Only assembles: each area under ``orchestration/defs/<area>/`` exports its assets (and checks,
sensors, schedules); adding a probe family is one line per list below. Importing this module
sets no environment variable and creates no folder (the dbt manifest is parsed when stale).

Lineage: landing/crows_pairs -> landing/descriptors -> landing/t2t_completions ->
stg_t2t_completions -> int_document_words -> int_association_counts -> fct_associations
(-> scoring -> fct_association_scores).
"""

from __future__ import annotations

import dagster as dg

from orchestration.defs.audits.checks import audit_checks
from orchestration.defs.audits.schedules import build_reaudit_schedule
from orchestration.defs.audits.sensors import audit_version_sensor
from orchestration.defs.counterfactual.assets import counterfactual_assets
from orchestration.defs.dbt.assets import dora_dbt_models
from orchestration.defs.dbt.resources import dbt_resource
from orchestration.defs.ingestion.assets import ingestion_assets
from orchestration.defs.modscan.assets import modscan_assets  # ModSCAN family
from orchestration.defs.scoring.assets import scoring_assets
from orchestration.defs.scoring.checks import judge_checks  # judge parse rate
from orchestration.defs.t2t.assets import t2t_assets
from orchestration.defs.vision.assets import vision_assets
from orchestration.defs.vlstereoset.assets import vlstereoset_assets  # probe family: VLStereoSet
from orchestration.instance import AUDIT_JOB

#: Every asset, per area (a new probe family adds its ``orchestration/defs/<family>/`` list here).
ASSETS = [
    *ingestion_assets,
    *t2t_assets,
    *vision_assets,
    dora_dbt_models,
    *scoring_assets,
    *counterfactual_assets,
    *modscan_assets,  # ModSCAN family
    *vlstereoset_assets,  # probe family: VLStereoSet
]
ASSET_CHECKS = [*audit_checks, *judge_checks]  # judge parse rate
SENSORS = [audit_version_sensor]

audit_job = dg.define_asset_job(
    AUDIT_JOB,
    selection=dg.AssetSelection.all(),
    description="Full audit: ingest CrowS-Pairs, extract descriptors, run the probes, build the association and score marts.",
)

defs = dg.Definitions(
    assets=ASSETS,
    jobs=[audit_job],
    resources={"dbt": dbt_resource()},
    # versioned audits: new-version sensor, re-audit schedule, collapse checks (defs/audits/)
    asset_checks=ASSET_CHECKS,
    sensors=SENSORS,
    schedules=[build_reaudit_schedule()],
)


def audit_job_for_multiprocess() -> dg.JobDefinition:
    """The resolved audit job, for ``dagster.reconstructable`` (``dora audit --executor
    multiprocess``): each step process re-imports this module and calls this function."""
    return defs.resolve_job_def(AUDIT_JOB)

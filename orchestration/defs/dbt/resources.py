"""The dbt project handle and CLI resource (dagster-dbt)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from dagster_dbt import DbtCliResource, DbtProject

from ingestion.landing import dora_home

DBT_PROJECT_DIR = Path(__file__).resolve().parents[3] / "dbt_project"


def dbt_env() -> None:
    """Point dbt at the current ``$DORA_HOME`` (absolute) and keep it offline and quiet."""
    os.environ["DORA_HOME"] = str(dora_home())
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")


@lru_cache(maxsize=1)
def dbt_project() -> DbtProject:
    """The cached :class:`DbtProject`; parses the project once if no manifest exists yet.

    ``prepare_if_dev`` only prepares under ``dagster dev``; the CLI, tests and CI get the
    manifest from the explicit ``prepare`` below.
    """
    dbt_env()
    project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)
    project.prepare_if_dev()
    if not project.manifest_path.exists():
        project.preparer.prepare(project)
    return project


def dbt_resource() -> DbtCliResource:
    return DbtCliResource(project_dir=dbt_project(), profiles_dir=str(DBT_PROJECT_DIR))

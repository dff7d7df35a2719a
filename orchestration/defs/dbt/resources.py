"""The dbt project handle and CLI resource (dagster-dbt)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from dagster_dbt import DbtCliResource, DbtProject

from ingestion.landing import SCHEMAS, dbt_home, landing_dir

DBT_PROJECT_DIR = Path(__file__).resolve().parents[3] / "dbt_project"


def dbt_env() -> None:
    """Point dbt at the current ``$DORA_HOME`` (absolute) and keep it offline and quiet.

    Also creates every landing folder (with its empty schema shard), so each dbt source's
    ``read_parquet`` glob is valid before its producer has landed anything.
    """
    os.environ["DORA_HOME"] = str(dbt_home())  # (issue 17) a plain-named alias of an odd home
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    for table in SCHEMAS:
        landing_dir(table)


def dbt_project_files() -> list[Path]:
    """Every file a dbt parse or build of the project reads: models, tests and macros (sorted),
    ``dbt_project.yml`` and ``profiles.yml``."""
    files = [p for folder in ("models", "tests", "macros") for p in sorted((DBT_PROJECT_DIR / folder).rglob("*")) if p.is_file()]
    return files + [DBT_PROJECT_DIR / "dbt_project.yml", DBT_PROJECT_DIR / "profiles.yml"]


def _manifest_is_stale(project: DbtProject) -> bool:
    """True when the manifest is missing or older than any file of the dbt project."""
    if not project.manifest_path.exists():
        return True
    built = project.manifest_path.stat().st_mtime
    return any(p.stat().st_mtime > built for p in dbt_project_files() if p.exists())


@lru_cache(maxsize=1)
def dbt_project() -> DbtProject:
    """The cached :class:`DbtProject`; parses the project when its manifest is missing or stale.

    ``prepare_if_dev`` only prepares under ``dagster dev``; the CLI, tests and CI get the
    manifest from the explicit ``prepare`` below.
    """
    dbt_env()
    project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)
    project.prepare_if_dev()
    if _manifest_is_stale(project):
        project.preparer.prepare(project)  # dagster-dbt: one writer at a time, under a file lock
    # A process that found the manifest fresh may be looking at one another process is still
    # writing (``dbt parse`` writes in place): wait for that writer's lock before it is read.
    from filelock import FileLock

    project.manifest_path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(project.manifest_path.with_suffix(".concurrent-update-lock")).acquire(timeout=300):
        pass
    return project


def dbt_resource() -> DbtCliResource:
    return DbtCliResource(project_dir=dbt_project(), profiles_dir=str(DBT_PROJECT_DIR))

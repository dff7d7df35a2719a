"""The dbt project handle and CLI resource (dagster-dbt), with no side effect at import.

The dbt executable is :func:`orchestration.instance.dbt_executable` (the ``dbt`` next to the
running interpreter, then ``PATH``) for every invocation, including the manifest parse, so
``.venv/bin/dora`` works from a shell where the virtualenv is not activated. The parse gets
the dbt environment (:func:`orchestration.instance.dbt_environment`) as its own subprocess
environment: importing the definitions sets no environment variable and creates no folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cached_property, lru_cache
from pathlib import Path

from dagster_dbt import DbtCliResource, DbtProject

from orchestration.instance import DBT_PROJECT_DIR, dbt_environment, dbt_executable


def dbt_project_files() -> list[Path]:
    """Every file a dbt parse or build of the project reads: models, tests and macros (sorted),
    ``dbt_project.yml`` and ``profiles.yml``."""
    files = [p for folder in ("models", "tests", "macros") for p in sorted((DBT_PROJECT_DIR / folder).rglob("*")) if p.is_file()]
    return files + [DBT_PROJECT_DIR / "dbt_project.yml", DBT_PROJECT_DIR / "profiles.yml"]


def _manifest_is_stale(project: DbtProject) -> bool:
    """True when the manifest is missing or older than any file of the dbt project, or than any of
    its folders: a file moved or deleted keeps its own time (``mv`` does not touch it) but changes
    its folders' times, and a model's folder is part of its configuration (its layer)."""
    if not project.manifest_path.exists():
        return True
    built = project.manifest_path.stat().st_mtime
    roots = [DBT_PROJECT_DIR / folder for folder in ("models", "tests", "macros")]
    folders = roots + [p for root in roots for p in root.rglob("*") if p.is_dir()]
    return any(p.stat().st_mtime > built for p in [*dbt_project_files(), *folders] if p.exists())


def prepare_dbt_project(project: DbtProject) -> None:
    """Parse the project (``dbt parse --quiet``) when its manifest is missing or stale, with
    dora's dbt executable and environment, one process at a time (a file lock next to the
    manifest, the name dagster-dbt's own preparer uses); a process that finds the manifest
    fresh still waits for a writer that is writing it.

    Raises:
        RuntimeError: ``dbt parse`` failed (its output is in the message).
    """
    from filelock import FileLock

    project.manifest_path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(project.manifest_path.with_suffix(".concurrent-update-lock")).acquire(timeout=300):
        if not _manifest_is_stale(project):
            return
        cmd = [
            dbt_executable(),
            "parse",
            "--quiet",
            "--project-dir",
            str(project.project_dir),
            "--profiles-dir",
            str(project.profiles_dir),
            "--target-path",
            str(project.manifest_path.parent),
        ]
        done = subprocess.run(cmd, env={**os.environ, **dbt_environment()}, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")


@lru_cache(maxsize=1)
def dbt_project() -> DbtProject:
    """The cached :class:`DbtProject`; parses the project when its manifest is missing or stale."""
    project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)
    prepare_dbt_project(project)
    return project


class DoraDbtCliResource(DbtCliResource):
    """dagster-dbt's CLI resource without two costs an audit's dbt steps do not need.

    - **The dbt version** is read from the installed dbt-core package when the executable is
      this environment's own ``dbt`` (the one beside the interpreter, which runs that
      package); dagster-dbt otherwise starts ``dbt --version`` (~2 s of CPU) in every process
      that runs a dbt step, only to tell dbt Core from the Fusion engine. Any other executable
      is still asked.
    - **No in-process dbt adapter**: dagster-dbt builds one (it loads every macro of the
      project, ~1.5 s of CPU per step) only to fetch row counts and column metadata after the
      build; dora's dbt assets ask for neither (the marts are read with ``dora query``).

    Both override private members of dagster-dbt's resource (pinned in ``pyproject.toml``);
    ``tests/test_dbt_resource.py`` checks the version against ``dbt --version``; every
    audit's build streams its models and tests through it.
    """

    @cached_property
    def _cli_version(self):
        if Path(self.dbt_executable).parent == Path(sys.executable).parent:
            from importlib.metadata import version as installed

            from packaging import version

            return version.parse(installed("dbt-core"))
        return super()._cli_version

    def _initialize_dbt_core_adapter(self, args):
        return None


def dbt_resource() -> DbtCliResource:
    """The ``dbt`` resource of every dbt asset (:class:`DoraDbtCliResource`; dbt executable:
    :func:`orchestration.instance.dbt_executable`)."""
    return DoraDbtCliResource(project_dir=dbt_project(), profiles_dir=str(DBT_PROJECT_DIR), dbt_executable=dbt_executable())

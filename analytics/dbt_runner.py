"""Run the dora dbt project in-process (for tests and benchmarks).

The Dagster code location drives dbt through dagster-dbt; this module is the plain-Python
way to do the same: ``invoke_dbt(["build"], dora_home)``.
"""

from __future__ import annotations

import os
from pathlib import Path

from dbt.cli.main import dbtRunner, dbtRunnerResult

from ingestion.contracts import SCHEMAS
from ingestion.home import dbt_home, dbt_target_dir
from ingestion.landing import landing_dir
from ingestion.landing_location import LANDING_URL_ENV, landing_url

__all__ = ["dbt_project_dir", "invoke_dbt"]


def dbt_project_dir() -> Path:
    """Folder of the dbt project (``<repo>/dbt_project``); it also holds ``profiles.yml``."""
    return Path(__file__).resolve().parent.parent / "dbt_project"


def _failure_messages(result: dbtRunnerResult) -> list[str]:
    messages: list[str] = []
    if result.exception is not None:
        messages.append(f"{type(result.exception).__name__}: {result.exception}")
    for node_result in getattr(result.result, "results", None) or []:
        status = str(getattr(node_result, "status", "")).lower()
        if status in {"error", "fail", "runtime error"}:
            node = getattr(node_result, "node", None)
            name = getattr(node, "unique_id", None) or getattr(node, "name", "?")
            messages.append(f"{name} [{status}]: {getattr(node_result, 'message', '')}")
    return messages


def _release_warehouse() -> None:
    """Close the DuckDB handle dbt-duckdb keeps open after an in-process invocation.

    dbt-duckdb caches one environment (an open ``duckdb`` connection to the warehouse file)
    per process in ``DuckDBConnectionManager._ENV`` and only replaces it when the
    credentials change. Left open, it holds the file lock, so other processes (or a
    read-only connection in this one) could not open the warehouse afterwards. Best effort:
    this is dbt-duckdb internals, so any failure here is ignored.
    """
    try:
        from dbt.adapters.duckdb.connections import DuckDBConnectionManager
    except ImportError:  # pragma: no cover
        return
    env = getattr(DuckDBConnectionManager, "_ENV", None)
    if env is None:
        return
    try:
        env.close()
    except Exception:  # pragma: no cover - nothing useful to do
        pass
    DuckDBConnectionManager._ENV = None


def invoke_dbt(args: list[str], dora_home: Path) -> dbtRunnerResult:
    """Invoke dbt (e.g. ``["build"]``) on the dora project against ``dora_home``'s warehouse.

    Sets ``DORA_HOME`` (absolute) and ``DBT_SEND_ANONYMOUS_USAGE_STATS=false`` in
    ``os.environ`` (dbt reads both from there), then runs
    ``dbtRunner().invoke([*args, "--project-dir", ..., "--profiles-dir", ...])``.

    Afterwards the warehouse file is released (dbt-duckdb would otherwise keep it open).
    Every landing table's folder is created first (with its empty ``_schema.parquet``
    shard), so a fresh ``dora_home`` builds empty tables instead of failing on a glob
    that matches no file.

    Raises:
        RuntimeError: when dbt reports ``success=False``, with the failing nodes' messages.
    """
    home = Path(dora_home).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DORA_HOME"] = str(home)
    os.environ["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    os.environ[LANDING_URL_ENV] = landing_url() or ""  # normalised for the sources (no trailing '/')
    for table in SCHEMAS:
        landing_dir(table)  # reads DORA_HOME, set just above
    os.environ["DORA_HOME"] = str(dbt_home())  # a plain-named alias of an odd home
    project = dbt_project_dir()
    # artifacts and log beside this home's warehouse (ingestion.home.dbt_target_dir), not in
    # the project's shared target/: builds of two homes at once do not overwrite each other
    target = dbt_target_dir("invoke_dbt")
    result = dbtRunner().invoke(
        [*args, "--project-dir", str(project), "--profiles-dir", str(project), "--target-path", str(target), "--log-path", str(target)]
    )
    _release_warehouse()
    if not result.success:
        details = "\n".join(_failure_messages(result)) or "no details reported"
        raise RuntimeError(f"dbt {' '.join(args)} failed:\n{details}")
    return result

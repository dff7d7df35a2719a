"""dora's Dagster instance, in one place: job and pool names, environment variables, the dbt
folder and environment, and the DuckDB single-writer rules ``dora audit`` and ``dora ui`` share.

Names (:data:`AUDIT_JOB`, :data:`DUCKDB_WRITER_POOL`, :data:`MODEL_INFERENCE_POOL`, the
``*_ENV`` variable names, :data:`DBT_PROJECT_DIR`) are stated here once; nothing here runs at
import. :func:`prepare_environment` (the CLI, once per command) sets the environment a run
needs; :func:`dbt_environment` is what a dbt invocation needs; :func:`dbt_executable` finds
the ``dbt`` next to the running interpreter (so ``.venv/bin/dora`` works without an
activated virtualenv).

DuckDB lets one process write a database file at a time; a second writer fails with
"Could not set lock on file". dora keeps that safe in three layers (docs/operations.md#fault-tolerance):

1. Producers never write DuckDB: model outputs land as Parquet shards
   (:mod:`ingestion.landing`); only dbt writes ``warehouse.duckdb``.
2. Every DuckDB writer (the ``@dbt_assets``) is in the Dagster pool :data:`DUCKDB_WRITER_POOL`,
   which :func:`configure_instance` limits to one slot (op-level pools), so runs of several
   partitions, or several ``dora audit`` processes, queue for the warehouse instead of failing.
3. dbt's own connection retry (``retries.connect_attempts`` in ``dbt_project/profiles.yml``)
   waits for a writer Dagster does not know about (a ``dora query`` reader, a ``dbt`` run
   from a shell).
4. Assets that only read the warehouse (scoring) wait for a writer's lock as long as dbt
   does: ``dora audit`` / ``dora ui`` set ``$DORA_WAREHOUSE_WAIT_SECONDS`` (300) for
   :func:`analytics.query.connect_read_only`; ``dora query`` keeps its 10 s.

A pool slot is freed when its step ends; the slots of a process killed with SIGKILL are freed by
``orchestration/run_reaper.py``. :func:`open_instance` opens the instance under a file lock (Dagster's
first-use storage creation is not safe when two ``dora`` commands start together) and turns
a corrupt storage file into one line (:class:`DagsterStorageError`). Nothing here reads or
stores a secret.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

from analytics.query import WAIT_ENV as WAREHOUSE_WAIT_ENV
from ingestion.errors import DagsterStorageError
from ingestion.home import DORA_HOME_ENV

#: The Dagster job of a whole audit (every asset), run by ``dora audit``, the sensor and the schedule.
AUDIT_JOB = "dora_audit"
#: Dagster pool of every DuckDB warehouse writer (the dbt assets, the audit checks), limited to 1 slot.
DUCKDB_WRITER_POOL = "duckdb_writer"
#: Dagster pool of the model-inference assets (not limited: they write Parquet only).
MODEL_INFERENCE_POOL = "model_inference"

#: Environment variables dora reads (and the CLI sets for a run). ``DORA_HOME_ENV`` and
#: ``WAREHOUSE_WAIT_ENV`` (seconds an in-run reader waits for the writer) are defined where they
#: are read (``ingestion.landing``, ``analytics.query``: the layers below cannot import this module).
DAGSTER_HOME_ENV = "DAGSTER_HOME"
DBT_TRACKING_ENV = "DBT_SEND_ANONYMOUS_USAGE_STATS"
DBT_TEST_SCOPE_ENV = "DORA_DBT_TEST_SCOPE"
#: What ``dora audit`` / ``dora ui`` set it to: as long as dbt's own connection retry waits.
RUN_WAREHOUSE_WAIT_SECONDS = "300"

#: The dbt project (models, tests, macros, ``profiles.yml``).
DBT_PROJECT_DIR = Path(__file__).resolve().parents[1] / "dbt_project"

#: ``$DAGSTER_HOME/dagster.yaml`` written by ``dora`` (when absent, or still the old default).
DAGSTER_YAML = """\
# Written by dora (orchestration/instance.py). DuckDB allows one writing process: every
# warehouse writer (the dbt assets) is in the pool 'duckdb_writer', which dora limits to one
# slot at op level (set on this instance's storage; see `dagster instance concurrency info`).
telemetry:
  enabled: false
concurrency:
  pools:
    granularity: op
run_monitoring:
  enabled: true
  # slots of runs that ended (failed / canceled in the UI) are freed after this delay
  free_slots_after_run_end_seconds: 30
"""
_OLD_DEFAULT_YAML = "telemetry:\n  enabled: false\n"


def dbt_executable() -> str:
    """The ``dbt`` to run: the one next to the running interpreter (a virtualenv's ``bin/``),
    else the first on ``PATH``, else ``"dbt"`` (dagster-dbt then says it is missing)."""
    beside = Path(sys.executable).parent / ("dbt.exe" if os.name == "nt" else "dbt")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("dbt") or "dbt"


def dbt_environment() -> dict[str, str]:
    """The environment variables a dbt invocation needs: ``DORA_HOME`` (absolute, read by
    ``profiles.yml`` and the sources), dbt's usage tracking off (offline), data tests
    scoped to the audits of the build (``DORA_DBT_TEST_SCOPE``) and the landing zone's
    object-storage URL (``DORA_LANDING_URL``, empty for the local folder).

    Raises:
        ingestion.errors.LandingLocationError: a malformed ``$DORA_LANDING_URL``."""
    from ingestion.home import dbt_home
    from ingestion.landing_location import LANDING_URL_ENV, landing_url

    # an odd home ('[', '*', an apostrophe ...) reaches dbt as a plain-named alias
    return {
        DORA_HOME_ENV: str(dbt_home()),
        DBT_TRACKING_ENV: os.environ.get(DBT_TRACKING_ENV, "false"),
        # the data tests of a build read the audits it wrote, not the whole history
        # (dbt_project/macros/build_scope.sql); a plain `dbt build` tests every row
        DBT_TEST_SCOPE_ENV: "this_build",
        # the landing zone on object storage (normalised: no trailing '/'), else '' (the local folder)
        LANDING_URL_ENV: landing_url() or "",
    }


def prepare_dbt_run() -> None:
    """Before a dbt build: set :func:`dbt_environment` in this process and create every landing
    folder (with its empty schema shard), so each dbt source's ``read_parquet`` glob is valid
    before its producer has landed anything. Called at run time, never at import."""
    from ingestion.contracts import SCHEMAS
    from ingestion.landing import landing_dir

    os.environ.update(dbt_environment())
    for table in SCHEMAS:
        landing_dir(table)


def prepare_environment(*, dagster: bool = True) -> Path:
    """What every ``dora`` command sets up once: ``DORA_HOME`` (absolute), ``DAGSTER_HOME``
    (default ``$DORA_HOME/dagster``, created, with :data:`DAGSTER_YAML`), dbt tracking off.

    ``dagster=False`` (a command that reads only the warehouse, ``dora query``) leaves
    ``DAGSTER_HOME`` untouched: a read-only or unusable Dagster folder is no reason to refuse it.

    Returns:
        The dora home folder.

    Raises:
        ingestion.errors.DoraError: the home's path holds ``?`` (see :func:`ingestion.warehouse.warehouse_path`).
    """
    from ingestion.home import dora_home
    from ingestion.warehouse import warehouse_path

    home = dora_home()
    # a home whose path holds '?' cannot keep the warehouse (DuckDB) nor Dagster's SQLite
    # storage (SQLAlchemy reads '?' as a URL query: "no such table: event_logs"): one clear
    # error here, before either is opened
    warehouse_path()
    os.environ[DORA_HOME_ENV] = str(home)
    os.environ.setdefault(DBT_TRACKING_ENV, "false")
    if dagster:
        os.environ.setdefault(DAGSTER_HOME_ENV, str(home / "dagster"))
        write_dagster_yaml(Path(os.environ[DAGSTER_HOME_ENV]))  # op-level pools: the writer pool gets 1 slot
    return home


def prepare_run_readers() -> None:
    """In-run warehouse readers (scoring) wait for a writer as long as dbt does."""
    os.environ.setdefault(WAREHOUSE_WAIT_ENV, RUN_WAREHOUSE_WAIT_SECONDS)


def write_dagster_yaml(dagster_home: Path) -> Path:
    """Write :data:`DAGSTER_YAML` to ``dagster_home/dagster.yaml`` unless the user has their own.

    A file that is absent or still holds dora's earlier default is (re)written; any other
    content is the user's and is left alone. Returns the path.
    """
    dagster_home.mkdir(parents=True, exist_ok=True)
    path = dagster_home / "dagster.yaml"
    if not path.exists() or path.read_text() == _OLD_DEFAULT_YAML:
        path.write_text(DAGSTER_YAML)
    return path


def configure_instance(instance) -> None:
    """Limit the :data:`DUCKDB_WRITER_POOL` pool to one slot unless a limit is already set.

    Args:
        instance: a ``dagster.DagsterInstance`` whose storage supports pools (the default
            SQLite storage does). A limit the user set (``dagster instance concurrency set``)
            is kept.
    """
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    configured = {p.name: p for p in storage.get_pool_limits()}
    pool = configured.get(DUCKDB_WRITER_POOL)
    if pool is None or getattr(pool, "from_default", False):
        storage.set_concurrency_slots(DUCKDB_WRITER_POOL, 1)


# --- concurrency: open the instance safely; corrupt Dagster storage is one line -------------
#: Lock file (in ``$DAGSTER_HOME``) that serialises the first creation of the instance storage.
INSTANCE_LOCK = ".dora-instance.lock"


def dagster_storage_problem(dagster_home: Path) -> tuple[Path, str] | None:
    """The first SQLite file of the Dagster storage under ``dagster_home`` that is unusable.

    Runs ``pragma quick_check`` (read-only) on every ``*.db`` file under ``dagster_home``
    (``history/runs.db``, ``history/runs/index.db``, ``schedules/schedules.db``, the per-run
    event logs).

    Returns:
        ``(path, sqlite error)`` of the first bad file, or ``None`` if all are readable.
    """
    import sqlite3

    for path in sorted(Path(dagster_home).rglob("*.db")):
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as con:
                result = con.execute("pragma quick_check").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc).lower():  # busy, not broken
                continue
            return path, str(exc)
        if result != "ok":
            return path, str(result)
    return None


def storage_error_message(dagster_home: Path, error: BaseException) -> str:
    """One line naming the bad Dagster storage file (or ``dagster_home``) and how to recover."""
    found = dagster_storage_problem(dagster_home)
    if found:
        bad, reason = found
        what, fix = f"the Dagster storage file {bad} is corrupt ({reason})", f"move it aside (mv '{bad}' '{bad}.corrupt')"
    else:
        cause = " ".join(str(getattr(error, "orig", None) or error).split())[:200]
        what, fix = (
            f"the Dagster storage in {dagster_home} is unusable ({cause})",
            f"move the folder aside (mv '{dagster_home}' '{dagster_home}.corrupt')",
        )
    return (
        f"{what}: {fix} and run the command again; Dagster recreates it empty (run history and sensor "
        "cursors are lost; audits resume from what landed). The warehouse and the landing zone (the source "
        "of truth) are untouched"
    )


def _is_storage_error(exc: BaseException) -> bool:
    import sqlite3

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            return True  # 'file is not a database', 'database disk image is malformed'
        if type(exc).__name__ == "DatabaseError" and type(exc).__module__.startswith("sqlalchemy"):
            return _is_storage_error(getattr(exc, "orig", None)) or "malformed" in str(exc) or "not a database" in str(exc)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def open_instance():
    """The Dagster instance of ``$DAGSTER_HOME`` (:func:`prepare_environment` first), opened
    under a file lock and checked.

    Dagster creates its SQLite storage (tables, indexes) on first use, and two processes doing
    that at once on a fresh ``DAGSTER_HOME`` fail ("table ... already exists"): two ``dora
    audit`` started together, or ``dora audit`` and ``dora ui``. The lock
    (``$DAGSTER_HOME/.dora-instance.lock``, :mod:`filelock`) makes the second wait for the
    first (under a second).

    Returns:
        A ``dagster.DagsterInstance`` (use it as a context manager to dispose of it).

    Raises:
        DagsterStorageError: a storage file is corrupt (:func:`storage_error_message`: names
            the file and how to recover).
    """
    from dagster import DagsterInstance
    from filelock import FileLock

    home = Path(os.environ[DAGSTER_HOME_ENV])
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(str(home / INSTANCE_LOCK)):
        try:
            instance = DagsterInstance.get()
            instance.get_runs(limit=1)  # touch the run, event-log and schedule storage
            instance.event_log_storage.get_pool_limits()
            if instance.schedule_storage is not None:
                instance.schedule_storage.all_instigator_state()
        except Exception as exc:
            if _is_storage_error(exc):
                raise DagsterStorageError(storage_error_message(home, exc)) from exc
            raise
    return instance

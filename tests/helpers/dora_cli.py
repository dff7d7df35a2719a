"""``dora`` as a subprocess on a scratch home: its environment and argv, and read-backs of what
it landed and built (shared by the fault-tolerance and concurrency tests)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[2]


def dora_env(home: Path, **extra) -> dict:
    env = dict(os.environ)
    env.pop("OPENAI_API_KEY", None)
    env.update(
        DORA_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    return env


def dora_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "orchestration.cli", *args]


def landed_t2t(home: Path, audit_id: str) -> list[tuple]:
    glob = str(home / "landing" / "t2t_completions" / "**" / "*.parquet")
    with duckdb.connect() as con:
        return con.sql(
            "select setting, descriptor, coalesce(descriptor_row, 1), letter, run from read_parquet(?, union_by_name=true) where audit_id = ?",
            params=[glob, audit_id],
        ).fetchall()


def warehouse_rows(home: Path, sql: str, params=None):
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def expected_t2t_keys(settings, letters, runs, per_dimension) -> set[tuple]:
    from ingestion.templates import curated_t2t_templates
    from models_inference.probes.biasdora.t2t import select_templates

    templates = select_templates(curated_t2t_templates(), settings=settings, per_dimension=per_dimension)
    # one key per probe row of the paper's lists (descriptor_row) x letter x run
    return {(t.setting, t.descriptor, t.descriptor_row, c, r) for t in templates for c in letters for r in range(1, runs + 1)}


def prepare_dbt_manifest() -> None:
    """Parse the dbt project once here, so concurrent subprocesses never race to write it."""
    import orchestration.definitions  # noqa: F401  (dbt_project() prepares the manifest)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound, then released) for a test server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

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


#: Packages a refused command must not import: the model stack and dbt. (``dora audit``'s
#: parser is built from the families' Dagster Config classes, so ``dagster`` is imported, but no
#: run, instance or storage is opened.)
HEAVY = ("torch", "transformers", "diffusers", "accelerate", "dbt", "dagster_dbt", "spacy")

#: The real entry point (``python -m orchestration.cli``), then the heavy packages it imported,
#: on stdout (an argparse refusal is on stderr), however it exits.
_ENTRY_POINT = """
import runpy, sys
HEAVY = {heavy!r}
{before}
sys.argv = ["dora", *sys.argv[1:]]
try:
    runpy.run_module("orchestration.cli", run_name="__main__")
finally:
    print("imported:", ",".join(sorted({{m.split(".")[0] for m in sys.modules}} & set(HEAVY))))
"""


def dora_process_imports(tmp_path: Path, *args: str, before: str = "") -> tuple:
    """``dora *args`` in its own process on a fresh home under ``tmp_path`` (``before``: Python run
    first): ``(the CompletedProcess, the packages of HEAVY it imported)``. What a refused command
    did not do, where a CPU-seconds bound would fail on a loaded machine."""
    import subprocess

    env = {**os.environ, "DORA_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster")}
    code = _ENTRY_POINT.format(heavy=HEAVY, before=before)
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600)
    imported = [line for line in proc.stdout.splitlines() if line.startswith("imported:")]
    assert imported, (proc.stdout, proc.stderr)
    return proc, [m for m in imported[-1].removeprefix("imported:").strip().split(",") if m]


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
    from ingestion.biasdora.templates import curated_t2t_templates
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

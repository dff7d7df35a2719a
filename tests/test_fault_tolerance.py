"""Fault tolerance: crash and resume, safe concurrency, secrets.

Every test runs real processes on a scratch DORA_HOME: ``dora audit`` as a subprocess (real
SmolLM2 for the crash test, the OpenAI-compatible stub server on 127.0.0.1 elsewhere), real
DuckDB locks, the real Dagster instance storage. Read-only queries: tests/test_query_safety.py.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
import uuid
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from tests.helpers.dora_cli import dora_argv as _dora
from tests.helpers.dora_cli import dora_env as _env
from tests.helpers.dora_cli import expected_t2t_keys as _expected_keys
from tests.helpers.dora_cli import landed_t2t as _landed_t2t
from tests.helpers.dora_cli import prepare_dbt_manifest as _prepare_dbt_manifest
from tests.helpers.dora_cli import warehouse_rows as _warehouse
from tests.helpers.openai_server import OpenAIStubServer


def _letter_reply(req: dict) -> str:
    """Stub chat answer: a real word starting with the requested letter, in brackets."""
    text = req["messages"][-1]["content"]
    letter = text.rsplit("[", 1)[1][0]
    return f"[{letter}rave]" if letter != "x" else "[xenial]"


# --------------------------------------------------------------------------- crash and resume
@pytest.mark.slow
@pytest.mark.scenario
def test_sigkill_mid_generation_then_rerun_lands_every_row_exactly_once(tmp_path):
    """SIGKILL ``dora audit`` (the embedded SmolLM2) once a shard has landed; the rerun finishes
    the audit.

    144 rows = 9 descriptors x 1 setting x 16 letters x 1 run, landed in 32-row shards
    (``--t2t-shard-rows``; 512 by default), so the kill lands after the first shard with 112
    rows still to generate.
    """
    _prepare_dbt_manifest()
    home = tmp_path / "home"
    settings, letters, runs = ["singular"], "abcdefghijklmnop", 1
    args = _dora(
        "audit",
        "--family",
        "biasdora",
        "--per-dimension",
        "1",
        "--settings",
        ",".join(settings),
        "--letters",
        letters,
        "--runs",
        str(runs),
        "--t2t-shard-rows",
        "32",
        "--audit-id",
        "crash-test",
        "--no-progress",
    )
    expected = _expected_keys(settings, letters, runs, per_dimension=1)
    assert len(expected) == 144
    shard_dir = home / "landing" / "t2t_completions" / "crash-test"
    log = open(tmp_path / "first.log", "w")
    proc = subprocess.Popen(args, env=_env(home), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 900  # generous: a loaded 2-core machine generates ~10x slower
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if shard_dir.exists() and any(p.name != "_schema.parquet" for p in shard_dir.glob("*.parquet")):
                break
            time.sleep(0.2)
        assert proc.poll() is None, f"dora audit ended before it could be killed:\n{(tmp_path / 'first.log').read_text()[-3000:]}"
        assert time.monotonic() < deadline, "no shard landed in time"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        log.close()
    assert proc.returncode == -signal.SIGKILL
    partial = _landed_t2t(home, "crash-test")
    assert 0 < len(partial) < len(expected), "the kill must land mid-generation"
    assert len(set(partial)) == len(partial)

    rerun = subprocess.run(args, env=_env(home), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    landed = _landed_t2t(home, "crash-test")
    # every expected row exactly once in the landing zone: nothing lost, nothing generated twice
    assert len(landed) == len(expected) and set(landed) == expected
    count, unique = _warehouse(
        home,
        "select count(*), count(distinct (setting, descriptor, descriptor_row, letter, run)) from stg_t2t_completions where audit_id = ?",
        ["crash-test"],
    )[0]
    assert count == unique == len(expected)
    rows = {
        tuple(r)
        for r in _warehouse(home, "select setting, descriptor, descriptor_row, letter, run from stg_t2t_completions where audit_id = 'crash-test'")
    }
    assert rows == expected
    assert _warehouse(home, "select status from dim_audits where audit_id = 'crash-test'") == [("finished",)]

    # the killed run was reaped: marked failed, no pool slot left claimed
    from dagster import DagsterInstance, DagsterRunStatus

    with DagsterInstance.from_config(str(home / "dagster")) as instance:
        statuses = [r.status for r in instance.get_runs()]
        assert statuses.count(DagsterRunStatus.SUCCESS) == 1
        assert statuses.count(DagsterRunStatus.FAILURE) == 1, statuses
        info = instance.event_log_storage.get_concurrency_info("duckdb_writer")
        assert info.slot_count == 1 and not info.claimed_slots and not info.pending_steps


# --------------------------------------------------------------------------- concurrency
TARGETS = ["stub-a", "stub-b", "stub-c"]
PARTITION_SETTINGS, PARTITION_LETTERS = ["singular", "verb"], "abc"


def _registry_yaml(base_url: str) -> str:
    probe = "{settings: [singular, verb], runs: 1, letters: abc, per_dimension: 1, prompt_style: chat}"
    return "targets:\n" + "".join(
        f"  - {{name: {t}, modality: t2t, backend: openai, model: {t}, base_url: '{base_url}', "
        f"version: {{source: explicit, value: v1}}, probe: {probe}}}\n"
        for t in TARGETS
    )


def _writer_slot_holder(home: Path) -> str | None:
    """Run id holding the 'duckdb_writer' pool slot in ``home``'s Dagster instance, if any.

    Opened under dora's instance lock, as dora opens it: opening a fresh home's storage while a
    dora process creates it would stamp Dagster's schema version twice (a broken storage).
    """
    from dagster import DagsterInstance
    from filelock import FileLock

    from orchestration.instance import INSTANCE_LOCK

    if not (home / "dagster" / "dagster.yaml").exists():
        return None
    try:
        with FileLock(str(home / "dagster" / INSTANCE_LOCK)), DagsterInstance.from_config(str(home / "dagster")) as instance:
            info = instance.event_log_storage.get_concurrency_info("duckdb_writer")
            return info.claimed_slots[0].run_id if info.claimed_slots else None
    except Exception:  # busy (SQLite) while the audits write it
        return None


def _run_pid(home: Path, run_id: str) -> int:
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home / "dagster")) as instance:
        return int(instance.get_run_by_id(run_id).tags["dora/pid"])


@pytest.fixture(scope="module")
def concurrent_partitions(tmp_path_factory):
    """Three partitions (registry targets stub-a/b/c, version v1) audited at once by three
    ``dora audit --target --executor multiprocess`` processes on one DORA_HOME (each step of
    each run in its own process: up to 6 processes competing for the warehouse), through the stub server, with the API
    key a unique marker; the process that first holds the warehouse writer slot is SIGKILLed
    (with its dbt child) during its dbt build. Its rows had landed, so the survivors' dbt
    builds (which queued for the slot) put them in the warehouse; resuming a killed audit is
    the crash test's subject.
    """
    _prepare_dbt_manifest()
    tmp = tmp_path_factory.mktemp("concurrent")
    home = tmp / "home"
    marker = f"sk-dora-secret-{uuid.uuid4().hex}"
    with OpenAIStubServer() as server:
        server.chat_reply = _letter_reply
        server.echo_key_in_errors = True  # like some proxies, the error text quotes the key
        server.fail_next(401)  # one failing request: its error row is stored, the key is not
        registry = tmp / "registry.yaml"
        registry.write_text(_registry_yaml(server.base_url))
        env = _env(home, OPENAI_API_KEY=marker)

        def args(target):
            return _dora(
                "audit",
                "--family",
                "biasdora",
                "--target",
                target,
                "--registry",
                str(registry),
                "--no-progress",
                "--verbose",
                "--executor",
                "multiprocess",  # every step in its own process, as runs launched from the UI
            )

        logs = {t: open(tmp / f"{t}.log", "w") for t in TARGETS}
        procs = {t: subprocess.Popen(args(t), env=env, stdout=logs[t], stderr=subprocess.STDOUT, start_new_session=True) for t in TARGETS}
        killed = None
        try:
            deadline = time.monotonic() + 600
            while killed is None and time.monotonic() < deadline and any(p.poll() is None for p in procs.values()):
                holder = _writer_slot_holder(home)
                if holder:
                    pid = _run_pid(home, holder)
                    killed = next(t for t, p in procs.items() if p.pid == pid)
                    time.sleep(1.0)  # let its dbt build start writing
                    os.killpg(pid, signal.SIGKILL)
                time.sleep(0.2)
            codes = {t: p.wait(timeout=900) for t, p in procs.items()}
        finally:
            for p in procs.values():
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
            for log in logs.values():
                log.close()
        outputs = {t: (tmp / f"{t}.log").read_text(errors="replace") for t in TARGETS}
        headers = [r["headers"].get("Authorization") or r["headers"].get("authorization") for r in server.requests]
    return {"home": home, "marker": marker, "killed": killed, "codes": codes, "outputs": outputs, "headers": headers}


@pytest.mark.slow
@pytest.mark.scenario
def test_partitions_audited_at_once_share_the_warehouse_and_survive_a_killed_writer(concurrent_partitions):
    """No 'Could not set lock' failure, no lost or duplicated row, no pool slot left claimed.

    The 'duckdb_writer' pool (1 slot, op level) and dbt's connect retry serialise the
    warehouse writes; the slot of the killed run is freed by the surviving processes' reaper
    (without it they would wait for that slot forever).
    """
    r = concurrent_partitions
    home, killed = r["home"], r["killed"]
    assert killed is not None, ("no audit ever held the warehouse writer slot", r["codes"], {t: out[-3000:] for t, out in r["outputs"].items()})
    assert r["codes"][killed] == -signal.SIGKILL
    for t in TARGETS:
        if t != killed:
            assert r["codes"][t] == 0, r["outputs"][t][-4000:]
        assert "Could not set lock" not in r["outputs"][t]
    expected = _expected_keys(PARTITION_SETTINGS, PARTITION_LETTERS, 1, per_dimension=1)
    rows = _warehouse(
        home,
        "select model_id, count(*), count(distinct (setting, descriptor, descriptor_row, letter, run)), count(distinct audit_id) "
        "from stg_t2t_completions group by model_id order by model_id",
    )
    assert rows == [(t, len(expected), len(expected), 1) for t in TARGETS]
    for (audit_id,) in _warehouse(home, "select distinct audit_id from stg_t2t_completions"):
        landed = _landed_t2t(home, audit_id)
        assert len(landed) == len(set(landed)) == len(expected)
    from dagster import DagsterInstance, DagsterRunStatus

    with DagsterInstance.from_config(str(home / "dagster")) as instance:
        runs = instance.get_runs()
        assert {run.tags.get("dagster/partition") for run in runs} == {f"{t}@v1" for t in TARGETS}
        statuses = [run.status for run in runs]
        assert statuses.count(DagsterRunStatus.SUCCESS) == 2 and statuses.count(DagsterRunStatus.FAILURE) == 1, statuses
        failed = next(run for run in runs if run.status == DagsterRunStatus.FAILURE)
        assert failed.tags["dagster/partition"] == f"{killed}@v1"
        info = instance.event_log_storage.get_concurrency_info("duckdb_writer")
        assert info.slot_count == 1 and not info.claimed_slots and not info.pending_steps


# --------------------------------------------------------------------------- secrets
def _secret_locations(home: Path, marker: str) -> list[str]:
    """Every place under ``home`` where ``marker`` is stored, decoding compressed formats."""
    found = []
    needle = marker.encode()
    for path in home.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(f"bytes of {path}")
    for path in home.rglob("*.parquet"):  # zstd-compressed: look at the decoded values
        table = pq.read_table(path)
        for name in table.column_names:
            if any(marker in str(v) for v in table.column(name).to_pylist() if v is not None):
                found.append(f"parquet {path} column {name}")
    wh = home / "warehouse.duckdb"
    if wh.exists():
        with duckdb.connect(str(wh), read_only=True) as con:
            cols = con.execute("select table_schema, table_name, column_name from information_schema.columns where data_type = 'VARCHAR'").fetchall()
            for schema, table, col in cols:
                try:
                    n = con.execute(f'select count(*) from "{schema}"."{table}" where "{col}" like ?', [f"%{marker}%"]).fetchone()[0]
                except duckdb.Error:
                    continue
                if n:
                    found.append(f"warehouse {schema}.{table}.{col}")
    for path in list(home.rglob("*.db")) + list(home.rglob("*.sqlite")):  # Dagster run/event storage
        con = sqlite3.connect(str(path))
        try:
            for (table,) in con.execute("select name from sqlite_master where type = 'table'"):
                for row in con.execute(f'select * from "{table}"'):
                    if any(marker in (v.decode(errors="replace") if isinstance(v, bytes) else str(v)) for v in row):
                        found.append(f"sqlite {path} table {table}")
                        break
        finally:
            con.close()
    return found


@pytest.mark.slow
def test_api_key_is_never_stored(concurrent_partitions):
    """Partitioned T2T audits through the OpenAI backend (one 401 whose text quotes the key):
    the key reaches the server and is stored nowhere: warehouse, landing Parquet,
    $DORA_HOME/logs, Dagster run/event storage, run config, tags and events."""
    r = concurrent_partitions
    home, marker = r["home"], r["marker"]
    assert r["headers"], {t: out[-3000:] for t, out in r["outputs"].items()}  # the audits called the server
    assert all(h == f"Bearer {marker}" for h in r["headers"])  # with the key
    for out in r["outputs"].values():
        assert marker not in out
    errors = _warehouse(home, "select raw_output from stg_t2t_completions where parse_status = 'error'")
    assert len(errors) == 1 and "invalid api key ***" in errors[0][0]
    assert (home / "logs").exists() and (home / "dagster").exists()
    assert _secret_locations(home, marker) == []

    from dagster import DagsterInstance
    from dagster._serdes import serialize_value

    with DagsterInstance.from_config(str(home / "dagster")) as instance:
        runs = instance.get_runs()
        assert len(runs) == 3
        for run in runs:
            assert marker not in json.dumps(run.run_config, default=str) and marker not in json.dumps(run.tags)
            for event in instance.all_logs(run.run_id):
                assert marker not in serialize_value(event)

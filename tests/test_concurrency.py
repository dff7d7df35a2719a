"""Colliding and killed runs (the gaps the fault-tolerance work left): no silent wrong result.

* two identical ``dora audit`` at once on a fresh ``DORA_HOME``: the Dagster storage is created
  once (``orchestration.instance.open_instance``), the second audit waits for the first's audit
  lock saying whom it waits for, and lands only what is missing;
* SIGTERM to ``dora audit`` mid-T2T: one line, exit 130, the Dagster run marked failed (not
  left STARTED), the shards landed so far kept; the waiting identical audit then generates
  only the missing rows: every key exactly once in landing and in ``stg_t2t_completions``;
* SIGTERM to ``dora ui``: ``dagster dev`` and every process it started are gone;
* a corrupt Dagster storage file: one line naming the file and the recovery, exit 2.

Real processes, the real Dagster instance storage, real dbt / DuckDB; the model is the
OpenAI-compatible stub server on 127.0.0.1 (tests/helpers/openai_server.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.helpers.cluster import HANG_GUARD
from tests.helpers.dora_cli import dora_argv as _dora
from tests.helpers.dora_cli import dora_env as _env
from tests.helpers.dora_cli import expected_t2t_keys as _expected_keys
from tests.helpers.dora_cli import free_port
from tests.helpers.dora_cli import landed_t2t as _landed_t2t
from tests.helpers.dora_cli import prepare_dbt_manifest as _prepare_dbt_manifest
from tests.helpers.dora_cli import warehouse_rows as _warehouse
from tests.helpers.openai_server import OpenAIStubServer

LETTERS = "abcdefghijklmnopqrstuvwxyz"


# --------------------------------------------------------------------------- fresh home
@pytest.mark.slow
@pytest.mark.scenario
def test_fresh_dagster_home_opened_by_three_processes_at_once(tmp_path):
    """Without the instance lock, Dagster's first-use schema creation races ("table
    secondary_indexes already exists") when two ``dora`` commands start together."""
    home = tmp_path / "home"
    # every process imports Dagster first and says so, then all open at once when told: a
    # barrier on their "ready" lines, not a fixed start time (a loaded machine takes longer
    # than any fixed time to import Dagster, and the processes would then open one by one)
    code = (
        "import sys\n"
        "import dagster  # noqa: F401\n"
        "from orchestration.instance import open_instance, prepare_environment\n"
        "prepare_environment()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "with open_instance() as instance:\n"
        "    print(len(instance.get_runs()))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], env=_env(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    try:
        for p in procs:  # a process that dies before it is ready ends its readline with "" at once
            assert p.stdout.readline().strip() == "ready", p.communicate(timeout=HANG_GUARD)[1][-2000:]
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=HANG_GUARD) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        assert out.strip() == "0"
    assert (home / "dagster" / "history" / "runs.db").is_file()


# --------------------------------------------------------------------------- corrupt storage
def _digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def dagster_home(tmp_path, monkeypatch):
    """A DORA_HOME with a created Dagster storage, a warehouse and a landing file (stand-ins)."""
    home = tmp_path / "home"
    monkeypatch.setenv("DORA_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    from orchestration.instance import open_instance, prepare_environment

    prepare_environment()
    with open_instance():
        pass
    (home / "landing" / "audits").mkdir(parents=True)
    (home / "landing" / "audits" / "shard.parquet").write_bytes(b"PAR1 stand-in")
    (home / "warehouse.duckdb").write_bytes(b"stand-in")
    return home


@pytest.mark.parametrize("name", ["history/runs.db", "history/runs/index.db", "schedules/schedules.db"])
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_dagster_storage_names_the_file_and_the_recovery(dagster_home, name, damage):
    from orchestration.instance import DagsterStorageError, open_instance

    bad = dagster_home / "dagster" / name
    if damage == "garbage":
        bad.write_bytes(os.urandom(4096))
    else:
        with open(bad, "r+b") as fh:
            fh.truncate(bad.stat().st_size // 2 or 100)
    kept = {p: _digest(dagster_home / p) for p in ("landing",)} | {
        "warehouse": hashlib.sha256((dagster_home / "warehouse.duckdb").read_bytes()).hexdigest()
    }
    with pytest.raises(DagsterStorageError) as err:
        open_instance()
    message = str(err.value)
    assert "\n" not in message and str(bad) in message and "mv " in message and "untouched" in message
    # the advice works: move it aside, and the instance opens again (empty)
    bad.rename(bad.with_name(bad.name + ".corrupt"))
    with open_instance() as instance:
        assert instance.get_runs() == []
    assert kept == {p: _digest(dagster_home / p) for p in ("landing",)} | {
        "warehouse": hashlib.sha256((dagster_home / "warehouse.duckdb").read_bytes()).hexdigest()
    }


@pytest.mark.parametrize("command", [["ui", "--port", "1"], ["audit", "--family", "biasdora", "--no-progress"]])
def test_corrupt_dagster_storage_cli_is_one_line_exit_2(dagster_home, command):
    bad = dagster_home / "dagster" / "history" / "runs.db"
    bad.write_bytes(b"not a database" * 100)
    done = subprocess.run(_dora(*command), env=_env(dagster_home), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith(f"dora {command[0]}:")]
    assert len(lines) == 1 and str(bad) in lines[0] and "corrupt" in lines[0], done.stderr[-2000:]


# --------------------------------------------------------------------------- dora ui signals
def _gone(procs, guard: float = HANG_GUARD) -> list:
    """Wait until every process of ``procs`` (pids or ``psutil.Process``) has exited or is a
    zombie; returns those still alive after ``guard`` s. A SIGKILLed process can take a while to
    be reaped on a loaded machine, so the test waits on its state, not a fixed sleep."""
    procs = [p if isinstance(p, psutil.Process) else _process(p) for p in procs]
    deadline = time.monotonic() + guard
    while True:
        alive = []
        for proc in procs:
            if proc is None:
                continue
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _process(pid: int):
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def _stubborn_group_script(child_ignores_term: bool) -> str:
    """A command that starts a grandchild ignoring SIGTERM (as a hung code server would), and
    ignores SIGTERM itself if asked; it prints the grandchild's pid."""
    return (
        "import signal, subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        f"open(sys.argv[1], 'w').write(str(g.pid))\n"
        f"signal.signal(signal.SIGTERM, signal.SIG_IGN if {child_ignores_term} else signal.SIG_DFL)\n"
        "time.sleep(60)\n"
    )


@pytest.mark.parametrize("child_ignores_term", [False, True])
def test_ui_signal_forwarding_leaves_no_process_of_the_group(tmp_path, child_ignores_term):
    """``dora ui``'s runner: SIGTERM to this process reaches the whole group; a child that does
    not stop is SIGKILLed after the grace period, and stragglers after the child exits."""
    from orchestration.cli.commands import _run_forwarding_signals

    pid_file = tmp_path / "grandchild.pid"
    script = tmp_path / "group.py"
    script.write_text(_stubborn_group_script(child_ignores_term))

    def terminate_when_started():
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=terminate_when_started, daemon=True).start()
    started = time.monotonic()
    code = _run_forwarding_signals([sys.executable, str(script), str(pid_file)], grace=1.0, stop_wait=1.0)
    # the group's processes sleep 60 s and may ignore SIGTERM: a return well before that means
    # the grace period's SIGKILL stopped them (the margin is for a loaded machine)
    assert time.monotonic() - started < 50
    assert code == 0  # stopped by SIGTERM: a clean stop, whether or not the group had to be killed
    grandchild = int(pid_file.read_text())
    assert _gone([grandchild]) == []
    assert signal.getsignal(signal.SIGTERM) == before  # handlers restored


@pytest.mark.slow
@pytest.mark.scenario
def test_ctrl_c_to_dora_ui_stops_dagster_and_every_child(tmp_path):
    """Ctrl-C: exit 130, one line, Dagster's webserver and daemon and every other child gone.
    How soon is bounded by the grace period's SIGKILL (``UI_STOP_GRACE_SECONDS``), checked above
    with a group that ignores SIGTERM; no wall-clock bound here: under 5 s on a quiet machine,
    12 s with a CPU hog on each core at load 20."""
    home, port = tmp_path / "home", free_port()
    log = open(tmp_path / "ui.log", "w")
    proc = subprocess.Popen(_dora("ui", "--port", str(port)), env=_env(home), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + HANG_GUARD  # it ends when the UI answers or dora ui exits
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
                time.sleep(1)
        children = psutil.Process(proc.pid).children(recursive=True)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        assert "dagster_webserver" in names and "dagster._daemon" in names, names
        log.flush()
        start = (tmp_path / "ui.log").stat().st_size
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=HANG_GUARD) == 130
        log.flush()
        with open(tmp_path / "ui.log") as fh:
            fh.seek(start)
            assert "dora ui: stopped (Ctrl-C)" in fh.read()
        alive = _gone(children)
        assert alive == [], [c.cmdline() for c in alive]
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in psutil.Process().children(recursive=True):
            c.kill()
        log.close()


# --------------------------------------------------------------------------- audits colliding
@pytest.mark.slow
@pytest.mark.scenario
def test_identical_audits_at_once_then_sigterm_to_the_generating_one(tmp_path):
    """Two identical ``dora audit`` start together on a fresh DORA_HOME (702 T2T rows, shards of
    512). One generates, the other waits for its audit lock naming it. Once the first shard has
    landed the generating one gets SIGTERM: one line, exit 130, its Dagster run failed; the
    waiting one then generates only the 190 missing rows. Every key lands exactly once."""
    _prepare_dbt_manifest()
    home, audit_id = tmp_path / "home", "collide"
    calls, release = [], threading.Event()

    def reply(req):
        # Hold every request after the first shard until the SIGTERM: a fixed slow-down let the
        # generating audit finish on a loaded machine before the other one reached the lock.
        calls.append(1)
        if len(calls) > 520:
            release.wait(timeout=420)
        return "rave, and"

    with OpenAIStubServer() as server:
        server.completion_reply = reply
        args = _dora(
            "audit",
            "--family",
            "biasdora",
            "--backend",
            "openai",
            "--base-url",
            server.base_url,
            "--model",
            "stub-model",
            "--prompt-style",
            "completion",
            "--per-dimension",
            "1",
            "--settings",
            "singular",
            "--letters",
            LETTERS,
            "--runs",
            "3",
            "--judge-backend",
            "none",
            "--no-progress",
            "--audit-id",
            audit_id,
        )
        env = _env(home, OPENAI_API_KEY="sk-test")
        logs = [tmp_path / f"run{i}.log" for i in range(2)]
        procs = [subprocess.Popen(args, env=env, stdout=open(p, "w"), stderr=subprocess.STDOUT) for p in logs]
        shards = home / "landing" / "t2t_completions" / audit_id
        try:
            deadline = time.monotonic() + 400
            waiting = None
            while time.monotonic() < deadline and all(p.poll() is None for p in procs):
                landed = shards.exists() and any(p.name != "_schema.parquet" for p in shards.glob("*.parquet"))
                waiting = next((i for i, p in enumerate(logs) if "is being generated by another dora process" in p.read_text()), None)
                if landed and waiting is not None:
                    break
                time.sleep(0.2)
            assert waiting is not None and all(p.poll() is None for p in procs), [p.read_text()[-2000:] for p in logs]
            killed = 1 - waiting
            # the lock is the T2T block's (collide--templates-<start>-<stop>), named in the waiting line
            locked = re.search(r"dora: audit (\S+) is being generated", logs[waiting].read_text()).group(1)
            assert locked.startswith(f"{audit_id}--templates-")
            holder = json.loads((home / "state" / "locks" / f"{locked}.lock.json").read_text())
            assert holder["pid"] == procs[killed].pid
            assert f"pid {procs[killed].pid} on" in logs[waiting].read_text()
            procs[killed].send_signal(signal.SIGTERM)
            release.set()
            codes = [p.wait(timeout=600) for p in procs]
        finally:
            release.set()
            for p in procs:
                if p.poll() is None:
                    p.kill()
    killed_log, waiting_log = logs[killed].read_text(), logs[waiting].read_text()
    assert codes[killed] == 130 and codes[waiting] == 0, (killed_log[-3000:], waiting_log[-3000:])
    lines = [line for line in killed_log.splitlines() if line.startswith("dora audit:")]
    assert len(lines) == 1 and "interrupted" in lines[0] and "marked failed" in lines[0], killed_log[-3000:]
    assert "Traceback" not in killed_log and "Traceback" not in waiting_log

    expected = _expected_keys(["singular"], LETTERS, 3, per_dimension=1)
    landed = _landed_t2t(home, audit_id)
    assert len(landed) == len(expected) == 702 and set(landed) == expected  # nothing lost, nothing twice
    count, unique = _warehouse(
        home,
        "select count(*), count(distinct (setting, descriptor, descriptor_row, letter, run)) from stg_t2t_completions where audit_id = ?",
        [audit_id],
    )[0]
    assert count == unique == 702
    assert _warehouse(home, "select status from dim_audits where audit_id = ?", [audit_id]) == [("finished",)]
    # the waiting audit generated only what the killed one had not landed (one 512-row shard kept)
    import duckdb

    with duckdb.connect() as con:
        events = con.execute(
            "select status, rows_generated from read_parquet(?) where audit_id = ? order by event_at",
            [str(home / "landing" / "audits" / audit_id / "*.parquet"), audit_id],
        ).fetchall()
    assert events == [("started", 0), ("failed", 512), ("started", 0), ("finished", 190)], events

    from dagster import DagsterInstance, DagsterRunStatus

    with DagsterInstance.from_config(str(home / "dagster")) as instance:
        statuses = sorted(r.status.value for r in instance.get_runs())
        assert statuses == sorted([DagsterRunStatus.FAILURE.value, DagsterRunStatus.SUCCESS.value]), statuses
        info = instance.event_log_storage.get_concurrency_info("duckdb_writer")
        assert not info.claimed_slots and not info.pending_steps

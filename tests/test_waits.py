"""Nothing waits for ever without saying so: each wait of the CLI that a hostile or unlucky input
could make endless ends within a stated bound, with one line on stderr and a non-zero exit.

* ``dora ui`` whose webserver cannot listen (a port in use, a host that does not resolve): refused
  before anything starts; a webserver process that dies or never accepts a connection stops the UI;
* ``dora audit --executor celery``: a broker URL that is no broker is one argparse line; a broker
  that cannot be reached is named (password redacted); no worker is announced, then a failure at
  ``--celery-worker-timeout``; SIGTERM while waiting is one line, exit 130; during the run, a
  worker that stops answering while it holds a step, or no worker at all, is said, then fails the
  step or the run at the worker timeout (``orchestration/celery_loop.py: WorkerWatch``; end to end
  in tests/test_scale_out.py);
* ``dora query --timeout``: a recursive CTE is stopped; a read-only PIVOT runs; a ``DAGSTER_HOME``
  that cannot be written does not stop it (it opens no Dagster instance).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tests.helpers.cluster import HANG_GUARD

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("DORA_HOME", str(h))
    monkeypatch.setenv("DAGSTER_HOME", str(h / "dagster"))
    monkeypatch.delenv("DORA_CELERY_BROKER", raising=False)
    return h


def _main(args, capsys) -> tuple[int, str, float]:
    """``dora <args>`` in this process: exit code, stderr, seconds taken."""
    from orchestration.cli import main

    started = time.monotonic()
    try:
        code = main(args)
    except SystemExit as exit_:  # argparse
        code = exit_.code
    return code, capsys.readouterr().err, time.monotonic() - started


def _one_line(err: str, prefix: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, err
    return lines[0]


def _env(home: Path) -> dict:
    env = dict(os.environ)
    env.pop("DORA_CELERY_BROKER", None)
    env.update(
        DORA_HOME=str(home), DAGSTER_HOME=str(home / "dagster"), PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", DBT_SEND_ANONYMOUS_USAGE_STATS="false"
    )
    return env


# ------------------------------------------------------------------------------------------ dora ui
def test_ui_on_a_port_in_use_is_one_line_exit_2(home, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err, took = _main(["ui", "--port", str(port)], capsys)
    assert code == 2 and took < 30
    line = _one_line(err, "dora ui:")
    assert f"127.0.0.1:{port}" in line and "address already in use" in line, line
    assert not list((home / "dagster").rglob("*.db"))  # refused before the instance was created


def test_ui_on_a_host_that_does_not_resolve_is_one_line_exit_2(home, capsys):
    code, err, took = _main(["ui", "--host", "not a host", "--port", "3999"], capsys)
    assert code == 2 and took < 30
    line = _one_line(err, "dora ui:")
    assert "not a host:3999" in line and "does not resolve" in line, line


_FAKE_DEV = """\
import subprocess, sys, time
# a stand-in for dagster dev: a 'dagster_webserver' child that {what}
subprocess.Popen([sys.executable, '-c', {child!r}, 'dagster_webserver'])
time.sleep(120)
"""


@pytest.mark.parametrize(
    "what,child,reason",
    [
        ("never listens (uvicorn that could not bind stays up)", "import time; time.sleep(120)", "accepted no connection"),
        ("exits", "import time; time.sleep(1)", "webserver process exited"),
    ],
    ids=["never_listens", "exits"],
)
def test_ui_whose_webserver_serves_nothing_stops_with_one_line(tmp_path, capsys, what, child, reason):
    from orchestration.cli.commands import WebserverWatch, _run_forwarding_signals

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "dev.py"
    script.write_text(_FAKE_DEV.format(what=what, child=child))
    started = time.monotonic()
    code = _run_forwarding_signals([sys.executable, str(script)], grace=1.0, stop_wait=1.0, watch=WebserverWatch("127.0.0.1", port, timeout=3.0))
    took = time.monotonic() - started
    assert code == 1 and took < 30, took
    line = _one_line(capsys.readouterr().err, "dora ui:")
    assert f"127.0.0.1:{port}" in line and reason in line, line


# ------------------------------------------------------------------------------ the Celery broker
@pytest.mark.parametrize(
    "url,message",
    [
        ("notaurl", "'notaurl' is not a broker URL"),
        ("memory://", "memory:// is a broker inside one process"),
        ("kafkaish://h:1", "kafkaish:// is not a Celery (kombu) broker transport"),
    ],
)
def test_a_broker_url_that_is_no_broker_is_one_argparse_line(home, capsys, url, message):
    code, err, took = _main(["audit", "--executor", "celery", "--celery-broker", url], capsys)
    assert code == 2 and took < 10
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("dora audit: error: argument --celery-broker:") and message in last, err
    assert not (home / "dagster").exists()


def test_a_closed_broker_port_is_named_with_its_password_redacted(home, capsys):
    from orchestration.cluster import celery_available

    if not celery_available():
        pytest.skip("dagster-celery is not installed (pip install -e '.[cluster]')")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, err, took = _main(
        ["audit", "--family", "biasdora", "--executor", "celery", "--celery-broker", f"redis://:s3cret@127.0.0.1:{port}/0"], capsys
    )
    assert code == 1 and took < 20, (took, err)
    line = _one_line(err, "dora audit:")
    assert f"cannot reach the Celery broker redis://:***@127.0.0.1:{port}/0" in line and "s3cret" not in err, line


def test_lost_result_cleanup_noise_is_dropped_and_other_noise_kept(monkeypatch):
    from orchestration import cluster

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u))
    cluster._quiet_lost_result_cleanup()

    AsyncResult = pytest.importorskip("celery.result").AsyncResult

    class ConnectionError(Exception):  # redis' own, not the builtin
        pass

    hook = sys.unraisablehook
    hook(type("U", (), {"object": AsyncResult.__del__, "exc_value": ConnectionError("gone")})())
    other = type("U", (), {"object": len, "exc_value": ValueError("x")})()
    hook(other)
    assert seen == [other]


# ------------------------------------------------------------- the Celery loop's watch on workers
class _Workers:
    """A stand-in for a Celery app's ``control.inspect(...).query_task``: ``held`` maps each
    answering worker to the task ids it holds; every call is recorded as (limit, ids)."""

    def __init__(self):
        self.held: dict[str, list[str]] | None = {}
        self.calls: list[tuple] = []
        self.control = self

    def inspect(self, timeout, limit):
        workers = self

        class _Inspect:
            def query_task(self, *ids):
                workers.calls.append((limit, ids))
                if workers.held is None:
                    raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
                return {host: {t: ["active", {}] for t in tasks if t in ids} for host, tasks in workers.held.items()}

        return _Inspect()


def _watch(timeout, records=None):
    pytest.importorskip("dagster_celery", reason="dagster-celery is not installed (pip install -e '.[cluster]')")
    from orchestration.celery_loop import WorkerWatch
    from orchestration.cluster import redacted

    now = [0.0]
    workers = _Workers()
    shown = redacted("redis://:s3cret@queue:6379/0")  # as dora_executor gives it
    return WorkerWatch(workers, shown, timeout, records, clock=lambda: now[0]), workers, now


def test_a_step_whose_worker_stops_answering_is_said_then_lost_at_the_timeout():
    watch, workers, now = _watch(6)
    workers.held = {"w0@h": ["t1"], "w1@h": ["t2"]}
    assert watch.check({"a": "t1", "b": "t2"}) == ({}, [], None)
    workers.held = {"w1@h": ["t2"]}  # w0's machine is gone; w1 still answers
    now[0] = 2
    assert watch.check({"a": "t1", "b": "t2"}) == ({}, [], None)
    assert workers.calls[-2][0] == 2 and workers.calls[-1][0] is None  # one missing: asked again, every worker waited for
    now[0] = 4
    assert watch.check({"a": "t1", "b": "t2"}) == (
        {},
        ["the Celery worker w0@h running step a does not answer: waiting up to 6 s (--celery-worker-timeout)"],
        None,
    )
    now[0] = 8
    lost, notices, failure = watch.check({"a": "t1", "b": "t2"})
    assert (
        lost == {"a": "its Celery worker w0@h has not answered within 6 s (--celery-worker-timeout): killed, or its machine lost"}
        and notices == []
        and failure is None
    )

    restarted, workers, now = _watch(6)  # the same name answers again, without the task: a restarted worker
    workers.held = {"w0@h": ["t1"]}
    restarted.check({"a": "t1"})
    workers.held = {"w0@h": []}
    now[0] = 2
    assert restarted.check({"a": "t1"}) == ({}, [], None)
    now[0] = 8
    assert restarted.check({"a": "t1"})[0] == {
        "a": "its Celery worker w0@h answers but has not held it for 6 s (--celery-worker-timeout), and no result came: restarted"
    }

    quick, workers, now = _watch(1)  # a timeout shorter than the notice delay: said all the same, first
    workers.held = {"w0@h": ["t1"]}
    quick.check({"a": "t1"})
    workers.held = {"w1@h": []}
    quick.check({"a": "t1"})
    now[0] = 1
    lost, notices, _ = quick.check({"a": "t1"})
    assert list(lost) == ["a"] and notices == ["the Celery worker w0@h running step a does not answer: waiting up to 1 s (--celery-worker-timeout)"]


def test_the_worker_that_took_a_step_is_known_from_its_event_before_any_sighting():
    seen = []

    def records(cursor):
        seen.append(cursor)
        return [("a", "w0@h", 10.0**10)], "c1"  # dagster_celery's "Executing steps a in celery worker" event

    watch, workers, now = _watch(5, records)
    workers.held = {"w1@h": []}  # w0 took step a and died before a check saw it hold the task
    watch.submitted["t1"] = 1.0
    assert watch.check({"a": "t1"}) == ({}, [], None)
    now[0] = 5
    assert list(watch.check({"a": "t1"})[0]) == ["a"]
    assert seen == [None]  # read once: the holder is remembered


def test_no_worker_at_all_is_said_then_fails_the_run_and_no_limit_only_says_so():
    watch, workers, now = _watch(10)
    workers.held = {}
    assert watch.check({"b": "t2", "a": "t1"}) == ({}, [], None)
    now[0] = 3
    line = "no Celery worker answers on redis://:***@queue:6379/0 while steps wait (a, b): waiting up to 10 s (--celery-worker-timeout)"
    assert watch.check({"b": "t2", "a": "t1"}) == ({}, [line], None)
    now[0] = 10
    failure = watch.check({"b": "t2", "a": "t1"})[2]
    assert (
        failure.startswith(
            "no Celery worker answered on redis://:***@queue:6379/0 within 10 s (--celery-worker-timeout) while steps waited: a, b; start a worker"
        )
        and "s3cret" not in failure
    )

    forever, workers, now = _watch(0)
    workers.held = None  # the broker itself is gone
    forever.check({"a": "t1"})
    now[0] = 3
    assert forever.check({"a": "t1"})[1] == [
        "the Celery broker redis://:***@queue:6379/0 cannot be reached while steps wait (a): waiting with no time limit"
    ]
    now[0] = 10**6
    assert forever.check({"a": "t1"}) == ({}, [], None)


# -------------------------------------------------------------------------- no Celery worker
@pytest.fixture
def redis_broker(tmp_path):
    from orchestration.cluster import celery_available
    from tests.helpers.cluster import redis_server

    if not celery_available():
        pytest.skip("dagster-celery is not installed (pip install -e '.[cluster]')")
    with redis_server(tmp_path / "redis") as url:
        yield url


def _audit_without_worker(home: Path, broker: str, *extra) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(REPO / ".venv" / "bin" / "dora"),
            "audit",
            "--family",
            "biasdora",
            "--no-progress",
            "--executor",
            "celery",
            "--celery-broker",
            broker,
            *extra,
        ],
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(home),
    )


def _read_until(proc: subprocess.Popen, text: str, timeout: float) -> tuple[str, float]:
    """stderr lines until one contains ``text`` (the seconds it took), within ``timeout``."""
    import selectors

    started, seen = time.monotonic(), ""
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    while time.monotonic() - started < timeout:
        if sel.select(timeout=0.5):
            line = proc.stderr.readline()
            seen += line
            if text in line:
                return seen, time.monotonic() - started
            if not line and proc.poll() is not None:
                break
    raise AssertionError(f"no {text!r} within {timeout} s:\n{seen}")


@pytest.mark.slow
def test_no_worker_is_announced_then_fails_at_the_worker_timeout(tmp_path, redis_broker):
    home = tmp_path / "home"
    home.mkdir()
    proc = _audit_without_worker(home, redis_broker, "--celery-worker-timeout", "6")
    try:
        # both waits end on the process's own output or exit; their bound only guards against a
        # hang (a loaded machine takes minutes to import what `dora audit` needs)
        seen, _ = _read_until(proc, "waiting for a Celery worker", HANG_GUARD)
        rest = proc.communicate(timeout=HANG_GUARD)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, seen + rest
    assert "Traceback" not in seen + rest
    assert f"waiting for a Celery worker on {redis_broker}" in seen
    line = _one_line(rest, "dora audit:")
    assert f"no Celery worker answered on {redis_broker} within 6 s (--celery-worker-timeout)" in line, line


@pytest.mark.slow
def test_sigterm_while_waiting_for_a_worker_is_one_line_exit_130(tmp_path, redis_broker):
    home = tmp_path / "home"
    home.mkdir()
    proc = _audit_without_worker(home, redis_broker)  # the default timeout (120 s)
    try:
        _read_until(proc, "waiting for a Celery worker", HANG_GUARD)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=HANG_GUARD)[1]
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    # the signal ended the wait, not the worker timeout (120 s): its line says so; no clock bound,
    # which a loaded machine stretches
    assert proc.returncode == 130, (took, rest)
    line = _one_line(rest, "dora audit:")
    assert "interrupted (Ctrl-C or SIGTERM) while waiting for a Celery worker" in line, rest


# -------------------------------------------------------------------------------------- dora query
@pytest.fixture
def warehouse(home):
    con = duckdb.connect(str(home / "warehouse.duckdb"))
    con.execute("create table t as select * from (values ('x', 1), ('y', 2), ('x', 3)) v(a, b)")
    con.close()
    return home


def test_query_timeout_stops_a_recursive_cte_with_one_line(warehouse, capsys):
    sql = "with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r"
    code, err, took = _main(["query", "--timeout", "1", sql], capsys)
    assert code == 1 and took < 15, (took, err)
    assert _one_line(err, "dora query:") == "dora query: query stopped after 1 s (--timeout)"


def test_query_runs_where_dagster_home_cannot_be_written(warehouse, monkeypatch, capsys):
    """dora query opens no Dagster instance: a DAGSTER_HOME where no folder can be made (under a
    regular file; a read-only mount is the same to it, even for root) is no reason to refuse."""
    blocker = warehouse / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(blocker / "dagster"))
    from orchestration.cli import main

    assert main(["query", "-f", "csv", "select a, sum(b) as s from t group by a order by a"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == ["a,s", "x,4", "y,2"] and err == ""
    monkeypatch.delenv("DAGSTER_HOME")  # unset: the default $DORA_HOME/dagster is not created either
    assert _main(["query", "select 1"], capsys)[0] == 0
    assert not (warehouse / "dagster").exists()


def test_query_timeout_flag_is_checked(warehouse, capsys):
    code, err, _ = _main(["query", "--timeout", "-1", "select 1"], capsys)
    assert code == 2 and err.strip().splitlines()[-1].endswith("--timeout: -1 is out of range: expected [0, 86400]")


def test_a_read_only_pivot_runs(warehouse, capsys):
    from orchestration.cli import main

    assert main(["query", "-f", "csv", "pivot t on a using sum(b) order by all"]) == 0
    assert capsys.readouterr().out.split() == ["x,y", "4,2"]


@pytest.mark.parametrize(
    "sql",
    [
        "with w as (copy (select 1 a, 2 b) to 'x.csv') pivot w on a using sum(b)",
        "pivot t on a using sum(b); drop table t",
    ],
)
def test_a_pivot_that_writes_is_refused(sql):
    from analytics.query import check_read_only
    from ingestion.errors import QueryRefusedError

    with pytest.raises((QueryRefusedError, duckdb.ParserException)):
        check_read_only(sql)

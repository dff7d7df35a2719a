"""Cluster services on 127.0.0.1 for the scale-out tests: a Redis broker, Celery workers started
with the standard ``dagster-celery worker start`` command, a throwaway PostgreSQL and a moto S3
server. Each starts on a free port in a temporary folder and is stopped by its own process id;
a missing binary or package raises ``pytest.skip`` with the reason."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.dora_cli import REPO, dora_env, free_port

VENV_BIN = Path(sys.executable).parent
#: Debian's PostgreSQL binaries (the newest installed major version; scripts/setup.sh installs one).
POSTGRES_BIN = max(
    Path("/usr/lib/postgresql").glob("*/bin"),
    key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    default=Path("/usr/lib/postgresql/15/bin"),
)


#: Seconds after which a wait for a started process gives up: a guard against a process that hangs
#: alive, not an expectation of speed. The waits end on events (it listens, a worker answers, or
#: it exits: then at once, with its code), so a loaded machine only makes them longer.
HANG_GUARD = 600.0


def wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout: float = HANG_GUARD) -> None:
    """Until ``proc`` listens on ``port``; raises as soon as it exits (or after ``timeout``: hung)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def stop(*procs: subprocess.Popen, timeout: float = 20.0) -> None:
    """Stop processes started here each in its own session, and their children (by process
    group id): all are signalled first, then waited for, so their shutdowns overlap."""
    import psutil

    families = []
    for proc in procs:
        if proc.poll() is not None:
            continue
        try:  # its descendants, also those that left its process group (a Celery worker's pool)
            families.append(psutil.Process(proc.pid).children(recursive=True))
        except psutil.NoSuchProcess:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    for child in (c for family in families for c in family):
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


@contextlib.contextmanager
def redis_server(folder: Path):
    """A ``redis-server`` on a free 127.0.0.1 port, no persistence; yields its ``redis://`` URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install -y redis-server; scripts/setup.sh tries)")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=open(folder / "redis.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_port(port, proc, "redis-server")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(proc)


def celery_yaml(folder: Path, broker: str) -> Path:
    """The worker config file of ``dagster-celery worker start -y``: the executor's own block."""
    path = folder / "celery.yaml"
    path.write_text(f"execution:\n  config:\n    broker: '{broker}'\n    backend: '{broker}'\n")
    return path


@contextlib.contextmanager
def celery_workers(home: Path, broker: str, count: int = 2, *, name: str = "w", queue: str | None = None, **env):
    """``count`` Celery worker processes (one ``dagster-celery worker start`` each, concurrency 1,
    named ``<name><i>``, listening on ``queue`` when given, else dagster-celery's own), sharing
    ``home``'s Dagster instance and landing zone; waits until each answers a ping."""
    if shutil.which("dagster-celery", path=str(VENV_BIN)) is None:
        pytest.skip("dagster-celery is not installed (pip install -e '.[cluster]')")
    folder = home / "workers"
    folder.mkdir(parents=True, exist_ok=True)
    config = celery_yaml(folder, broker)
    init_instance(home / "dagster")
    environ = dora_env(home, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", **env)
    procs = []
    try:
        for i in range(count):
            args = [
                str(VENV_BIN / "dagster-celery"),
                "worker",
                "start",
                "-A",
                "dagster_celery.app",
                "-y",
                str(config),
                "-n",
                f"{name}{i}",
                "-l",
                "WARNING",
                *(("-q", queue) if queue else ()),
                "--",
                "--concurrency",
                "1",
                "--pool",
                "prefork",
            ]
            procs.append(
                subprocess.Popen(
                    args, env=environ, cwd=REPO, stdout=open(folder / f"{name}{i}.log", "w"), stderr=subprocess.STDOUT, start_new_session=True
                )
            )
        wait_for_workers(broker, count, procs, names=[f"{name}{i}" for i in range(count)])
        yield procs
    finally:
        stop(*procs)


def init_instance(dagster_home: Path) -> None:
    """Create ``dagster_home`` with dora's ``dagster.yaml`` and its storage, once, before workers
    (each opens the instance on start; two creating SQLite tables at once collide)."""
    from dagster import DagsterInstance

    from orchestration.instance import write_dagster_yaml

    write_dagster_yaml(dagster_home)
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        instance.get_runs(limit=1)


def wait_for_workers(broker: str, count: int, procs, timeout: float = HANG_GUARD, names=None) -> None:
    """Until ``count`` workers answer a ping on ``broker`` (each of ``procs`` still running; with
    ``names``, the workers of those names: others may share the broker)."""
    from celery import Celery

    app = Celery("dagster", broker=broker, backend=broker)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a Celery worker has exited (its log: <name><i>.log in the home's workers folder)")
            if names:
                replies = app.control.ping(timeout=1.0, destination=[f"{n}@{socket.gethostname()}" for n in names]) or []
            else:  # limit: return as soon as every worker answered, not at the end of the timeout
                replies = app.control.ping(timeout=1.0, limit=count) or []
            if len(replies) >= count:
                return
            time.sleep(0.2)
    finally:
        app.close()
    raise RuntimeError(f"{count} Celery workers did not answer within {timeout:.0f} s")


@contextlib.contextmanager
def moto_s3(folder: Path):
    """moto's S3 server (``moto[server]``) on a free 127.0.0.1 port; yields the environment a
    client needs (``AWS_ENDPOINT_URL`` and throwaway credentials): dora's code reads nothing
    else, as against real S3."""
    pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install -e '.[cluster]')")
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install -e '.[cluster]')")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=open(folder / "moto.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_port(port, proc, "moto server")
        yield {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    finally:
        stop(proc)


@contextlib.contextmanager
def postgres_server():
    """A throwaway PostgreSQL (Debian's binaries) in a new data folder on a free 127.0.0.1
    port, run as the ``postgres`` user (``initdb`` refuses root); yields the ``DAGSTER_PG_URL``
    environment of ``docs/cluster/dagster.yaml``. The data folder is removed afterwards."""
    import tempfile

    # runuser lives in sbin, which a user's PATH (or a bare `env -i` one) may leave out
    runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
    if not (POSTGRES_BIN / "initdb").exists() or runuser is None:
        pytest.skip(f"PostgreSQL binaries not found in {POSTGRES_BIN} (Debian: apt-get install -y postgresql; scripts/setup.sh tries)")
    import pwd

    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no 'postgres' user to run PostgreSQL as")
    folder = Path(tempfile.mkdtemp(prefix="dora-pg-"))
    os.chown(folder, user.pw_uid, user.pw_gid)
    data, port = folder / "data", free_port()
    as_postgres = [runuser, "-u", "postgres", "--"] if os.geteuid() == 0 else []
    proc = None
    try:
        # a throwaway database: no fsync, neither at initdb nor at each commit (Dagster commits
        # every event; waiting for the disk there is time the test does not need to spend)
        subprocess.run(
            [*as_postgres, str(POSTGRES_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
            check=True,
            capture_output=True,
        )
        proc = subprocess.Popen(
            [
                *as_postgres,
                str(POSTGRES_BIN / "postgres"),
                "-D",
                str(data),
                "-p",
                str(port),
                "-h",
                "127.0.0.1",
                "-k",
                str(folder),
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(port, proc, "postgres")
        subprocess.run(
            [str(POSTGRES_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "dagster"], check=True, capture_output=True
        )
        yield {"DAGSTER_PG_URL": f"postgresql+psycopg2://postgres:unused@127.0.0.1:{port}/dagster"}
    finally:
        if proc is not None:
            stop(proc)
        shutil.rmtree(folder, ignore_errors=True)

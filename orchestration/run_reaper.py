"""The runs of ``dora`` processes that died, failed and their pool slots freed.

A pool slot (``orchestration/instance.py``: the one warehouse-writer slot) is freed when its step
ends. A process killed with SIGKILL never frees it, and its run stays "started" forever, which
would block every later warehouse write. So ``dora audit`` tags its runs with its process
identity (:func:`process_tags`) and, before and while it runs, :func:`reap_dead_runs` marks the
runs of dead ``dora`` processes on this host as failed and frees their slots
(docs/operations.md#fault-tolerance).
"""

from __future__ import annotations

import os
import socket
import threading

TAG_PID = "dora/pid"
TAG_HOST = "dora/host"
TAG_START = "dora/process_start"


def _process_start(pid: int) -> str | None:
    """Start time of a process in clock ticks since boot (Linux ``/proc``), ``None`` elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            after_name = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if after_name[0] == "Z":  # zombie: dead, not yet reaped by its parent
        return "zombie"
    return after_name[19]


def process_tags() -> dict[str, str]:
    """Run tags naming this process (pid, host, start time), used by :func:`reap_dead_runs`."""
    return {
        TAG_PID: str(os.getpid()),
        TAG_HOST: socket.gethostname(),
        TAG_START: _process_start(os.getpid()) or "",
    }


def _alive(pid: int, start: str) -> bool:
    now = _process_start(pid)
    if now == "zombie":
        return False
    if now is not None:
        return not start or now == start  # a reused pid has another start time
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_dead_runs(instance) -> list[str]:
    """Fail the unfinished runs of ``dora`` processes on this host that no longer exist.

    For each run still queued / starting / started / canceling whose :func:`process_tags`
    name a dead process on this host: report the run failed (with a message saying so) and
    free every pool slot it held. Runs launched by other means (the UI) are left alone.

    Returns:
        The run ids that were reaped.
    """
    from dagster import DagsterRunStatus, RunsFilter

    unfinished = [
        DagsterRunStatus.QUEUED,
        DagsterRunStatus.NOT_STARTED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.CANCELING,
    ]
    host = socket.gethostname()
    reaped = []
    for run in instance.get_runs(filters=RunsFilter(statuses=unfinished, tags={TAG_HOST: host})):
        try:
            pid = int(run.tags.get(TAG_PID, ""))
        except ValueError:
            continue
        if pid == os.getpid() or _alive(pid, run.tags.get(TAG_START, "")):
            continue
        instance.report_run_failed(run, message=f"dora: the process that ran this audit (pid {pid} on {host}) died; its pool slots were freed")
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reaped.append(run.run_id)
    return reaped


class DeadRunReaper:
    """Context manager: call :func:`reap_dead_runs` every ``interval`` s in a daemon thread.

    So a run waiting for the warehouse slot of a process that is killed meanwhile resumes
    instead of waiting forever. Errors in the thread are ignored (best effort).
    """

    def __init__(self, instance, interval: float = 10.0):
        self.instance, self.interval = instance, interval
        self._stop = threading.Event()

    def _loop(self):
        while not self._stop.wait(self.interval):
            try:
                reap_dead_runs(self.instance)
            except Exception:  # pragma: no cover - storage hiccups must not kill the audit
                pass

    def __enter__(self):
        self._thread = threading.Thread(target=self._loop, name="dora-reaper", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)


__all__ = ["DeadRunReaper", "TAG_HOST", "TAG_PID", "TAG_START", "process_tags", "reap_dead_runs"]

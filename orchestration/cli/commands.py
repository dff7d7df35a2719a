"""The ``dora`` commands other than ``audit``: ``query``, ``ui``, ``models``, ``diff``, ``report``."""

from __future__ import annotations

import os
import sys

from orchestration.instance import prepare_environment, prepare_run_readers

def cmd_query(args) -> int:
    prepare_environment()
    from analytics.query import QueryRefusedError, WarehouseBusyError, format_result, run_query

    import duckdb

    try:
        print(format_result(run_query(args.sql), args.format))
    except (QueryRefusedError, WarehouseBusyError, FileNotFoundError) as exc:
        print(f"dora query: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:
        print(f"dora query: SQL error: {str(exc).splitlines()[0]}", file=sys.stderr)  # one line
        return 2
    return 0


def cmd_ui(args) -> int:
    prepare_environment()
    import subprocess

    from orchestration.instance import configure_instance, open_instance, reap_dead_runs

    with open_instance() as instance:  # creates / checks the storage before dagster dev opens it
        configure_instance(instance)  # runs launched from the UI share the 1-slot 'duckdb_writer' pool
        reap_dead_runs(instance)
    prepare_run_readers()  # in-run readers wait for a writer

    cmd = [sys.executable, "-m", "dagster", "dev", "-m", "orchestration.definitions", "-h", args.host, "-p", str(args.port)]
    print(f"dora: starting the Dagster UI on http://{args.host}:{args.port} (DAGSTER_HOME={os.environ['DAGSTER_HOME']})", file=sys.stderr)
    return _run_forwarding_signals(cmd)


#: Seconds ``dora ui`` waits for ``dagster dev`` to stop after a forwarded signal before it
#: SIGKILLs the process group (``dagster dev`` itself needs ~10 s to stop its services).
UI_STOP_GRACE_SECONDS = 60.0


def _run_forwarding_signals(cmd: list[str], grace: float = UI_STOP_GRACE_SECONDS, stop_wait: float = 5.0) -> int:
    """Run ``cmd`` in its own process group; SIGTERM / SIGINT / SIGHUP to this process are
    forwarded to the whole group (``dagster dev`` and its webserver, daemon and code servers),
    so stopping ``dora ui`` never orphans them.

    If the group has not stopped ``grace`` s after the first forwarded signal it is SIGKILLed;
    once ``cmd`` has exited, any process of its group still running is stopped too (SIGTERM,
    then SIGKILL after ``stop_wait`` s).

    Returns:
        ``cmd``'s exit code (``dagster dev`` exits 0 when stopped by Ctrl-C / SIGTERM), or
        128 + N if it was killed by signal N.
    """
    import signal
    import subprocess
    import time

    child = subprocess.Popen(cmd, start_new_session=True)
    stopping: list[float] = []

    def signal_group(signum: int) -> None:
        try:
            os.killpg(child.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def forward(signum, _frame):
        stopping.append(time.monotonic())
        signal_group(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stopping and time.monotonic() - stopping[0] > grace:
                    signal_group(signal.SIGKILL)
            except KeyboardInterrupt:  # a handler race: forward and keep waiting
                forward(signal.SIGINT, None)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _stop_group(child.pid, stop_wait)
    return code if code >= 0 else 128 - code


def _stop_group(pgid: int, wait: float = 5.0) -> None:
    """SIGTERM every process still in process group ``pgid``, SIGKILL what is left after ``wait`` s."""
    import signal
    import time

    def alive() -> bool:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    if not alive():
        return
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive():
        os.killpg(pgid, signal.SIGKILL)


def cmd_models(args) -> int:
    prepare_environment()
    from analytics.diff import models_overview
    from analytics.query import format_result
    from ingestion.registry import RegistryError, load_registry

    try:
        registry = load_registry(args.registry)
    except RegistryError as exc:
        print(f"dora models: {exc}", file=sys.stderr)
        return 2
    from models_inference.model_ref import resolve_version

    print(format_result(models_overview(registry, resolve=None if args.no_resolve else resolve_version), args.format))
    return 0


def cmd_diff(args) -> int:
    prepare_environment()
    import duckdb

    from analytics.diff import DiffError, audit_diff
    from analytics.query import WarehouseBusyError, WarehouseMissingError

    if args.family != "biasdora":  # probe families: their change-test marts (analytics/family_diff.py)
        from analytics.family_diff import family_diff

        try:
            print(family_diff(args.family, args.target, args.from_ref, args.to_ref).text(args.format, top=args.top))
        except (DiffError, WarehouseBusyError, WarehouseMissingError) as exc:
            print(f"dora diff: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        report = audit_diff(args.target, args.from_ref, args.to_ref, top=args.top)
    except (DiffError, duckdb.CatalogException) as exc:  # CatalogException: no BiasDora marts built
        from analytics.family_diff import family_hint  # an audit / model of another probe family?

        print(f"dora diff: {str(exc).splitlines()[0]}{family_hint(args.target, args.from_ref, args.to_ref)}", file=sys.stderr)
        return 2
    except (WarehouseBusyError, WarehouseMissingError) as exc:
        print(f"dora diff: {exc}", file=sys.stderr)
        return 2
    print(report.text(args.format))
    return 0


def cmd_report(args) -> int:
    home = prepare_environment()
    from analytics.query import WarehouseBusyError, WarehouseMissingError
    from analytics.report import write_report

    from analytics.vlstereoset import write_vlstereoset_report  # probe family: VLStereoSet

    try:
        path = write_report(args.out, audit_id=args.audit_id, top=args.top)
    except LookupError as exc:  # no BiasDora score marts: the VLStereoSet page may still exist
        path, missing = None, exc
    except (WarehouseMissingError, WarehouseBusyError) as exc:
        print(f"dora report: {exc}", file=sys.stderr)
        return 2
    from pathlib import Path

    from ingestion.landing import safe_path_component

    out = Path(args.out) if args.out else home / "reports" / (safe_path_component(args.audit_id) if args.audit_id else "all")
    vls = write_vlstereoset_report(out, args.audit_id)
    if path is None and vls is None:
        print(f"dora report: {missing}", file=sys.stderr)
        return 2
    for written in (path, vls):
        if written is not None:
            print(f"dora: report written to {written} (DORA_HOME={home})")
    return 0

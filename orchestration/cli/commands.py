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
        print(f"dora query: SQL error: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_ui(args) -> int:
    prepare_environment()
    import subprocess

    from dagster import DagsterInstance

    from orchestration.instance import configure_instance, reap_dead_runs

    with DagsterInstance.get() as instance:
        configure_instance(instance)  # runs launched from the UI share the 1-slot 'duckdb_writer' pool
        reap_dead_runs(instance)
    prepare_run_readers()  # in-run readers wait for a writer

    cmd = [sys.executable, "-m", "dagster", "dev", "-m", "orchestration.definitions", "-h", args.host, "-p", str(args.port)]
    print(f"dora: starting the Dagster UI on http://{args.host}:{args.port} (DAGSTER_HOME={os.environ['DAGSTER_HOME']})", file=sys.stderr)
    return subprocess.call(cmd)


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
    from analytics.diff import DiffError, audit_diff
    from analytics.query import WarehouseBusyError, WarehouseMissingError

    try:
        report = audit_diff(args.target, args.from_ref, args.to_ref, top=args.top)
    except (DiffError, WarehouseBusyError, WarehouseMissingError) as exc:
        print(f"dora diff: {exc}", file=sys.stderr)
        return 2
    print(report.text(args.format))
    return 0


def cmd_report(args) -> int:
    home = prepare_environment()
    from analytics.query import WarehouseBusyError, WarehouseMissingError
    from analytics.report import write_report

    try:
        path = write_report(args.out, audit_id=args.audit_id, top=args.top)
    except (WarehouseMissingError, WarehouseBusyError, LookupError) as exc:
        print(f"dora report: {exc}", file=sys.stderr)
        return 2
    print(f"dora: report written to {path} (DORA_HOME={home})")
    return 0

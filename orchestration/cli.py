"""The ``dora`` command line: run audits, query associations, open the Dagster UI.

``dora audit`` executes the Dagster job ``dora_audit`` in-process against the Dagster
instance in ``$DORA_HOME/dagster``, so every audit run and its lineage show up in the UI
started by ``dora ui`` (``dagster dev`` on the same instance).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

EPILOG = """\
environment:
  DORA_HOME   where the warehouse (warehouse.duckdb), landing Parquet and the Dagster
              instance live (default: ./data)

examples:
  dora audit                                  # quick audit, embedded SmolLM2-135M (offline)
  dora audit --per-dimension 0 --runs 10      # paper scale: 406 descriptors x 5 x 26 x 10
  dora audit --descriptors "alcoholic person,child" --settings singular,verb
  dora audit --backend openai --model gpt-4o --prompt-style chat   # needs OPENAI_API_KEY
  dora query "select * from fct_associations where is_significant order by fisher_q limit 20"
  dora ui                                     # Dagster UI with lineage and runs
"""


def _home() -> Path:
    from ingestion.landing import dora_home

    home = dora_home()
    os.environ["DORA_HOME"] = str(home)
    os.environ.setdefault("DAGSTER_HOME", str(home / "dagster"))
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    dagster_home = Path(os.environ["DAGSTER_HOME"])
    dagster_home.mkdir(parents=True, exist_ok=True)
    yaml = dagster_home / "dagster.yaml"
    if not yaml.exists():
        yaml.write_text("telemetry:\n  enabled: false\n")
    return home


def _csv_list(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _build_parser() -> argparse.ArgumentParser:
    from models_inference.prompts import T2T_SETTINGS
    from orchestration.defs.config import DEFAULT_PER_DIMENSION, DEFAULT_RUNS

    parser = argparse.ArgumentParser(
        prog="dora",
        description="dora audits language and vision-language models for hidden biased associations "
        "(BiasDora method: CrowS-Pairs descriptors, probes, tf-idf, Fisher's exact test, q-values).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    audit = sub.add_parser(
        "audit",
        help="run a full audit: descriptors -> T2T probe -> association marts",
        description="Run the whole audit chain as the Dagster job 'dora_audit' and print a summary. "
        "Re-running the same audit generates only rows that have not landed yet.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    audit.add_argument("--model", default="smollm2-135m", help="'smollm2-135m' (embedded), a local folder/.gguf, a cached hub id, or an API model name")
    audit.add_argument("--backend", default="transformers", choices=["transformers", "openai"], help="generation backend")
    audit.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (backend openai); key from $OPENAI_API_KEY")
    audit.add_argument("--settings", default=",".join(T2T_SETTINGS), help="comma-separated T2T settings")
    audit.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="completions per descriptor x setting x letter (paper: 10)")
    audit.add_argument("--letters", default="abcdefghijklmnopqrstuvwxyz", help="first letters to probe")
    audit.add_argument("--descriptor-source", default="biasdora", choices=["biasdora", "crows_pairs"], help="curated paper list or descriptors extracted from CrowS-Pairs")
    audit.add_argument("--descriptors", default="", help="comma-separated descriptor subset (normalised keys, e.g. 'alcoholic person,child')")
    audit.add_argument("--per-dimension", type=int, default=DEFAULT_PER_DIMENSION, help="descriptors per bias dimension; 0 = all")
    audit.add_argument("--prompt-style", default=None, choices=["chat", "completion"], help="default: the model's (completion for small local models)")
    audit.add_argument("--batch-size", type=int, default=64, help="prompts per batch (transformers backend)")
    audit.add_argument("--audit-id", default=None, help="override the deterministic audit id")
    audit.add_argument("--top", type=int, default=3, help="top associations shown per bias dimension")
    audit.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    audit.add_argument("--verbose", "-v", action="store_true", help="show dbt's output (default: $DORA_HOME/logs/last_audit_dbt.log)")

    query = sub.add_parser(
        "query",
        help="run read-only SQL on the warehouse",
        description="Run read-only SQL (SELECT/WITH/SHOW/DESCRIBE/EXPLAIN) on $DORA_HOME/warehouse.duckdb. "
        "Public relations: stg_t2t_completions, fct_associations.",
    )
    query.add_argument("sql", help="the SQL to run")
    query.add_argument("--format", "-f", default="table", choices=["table", "csv", "json"])

    ui = sub.add_parser("ui", help="start the Dagster UI (dagster dev) on this DORA_HOME")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1")
    return parser


def cmd_audit(args) -> int:
    home = _home()
    from dagster import DagsterInstance

    from analytics.summary import audit_summary
    from orchestration.definitions import AUDIT_JOB, defs

    config = {
        "model": args.model,
        "backend": args.backend,
        "base_url": args.base_url,
        "settings": _csv_list(args.settings),
        "runs": args.runs,
        "letters": args.letters,
        "descriptor_source": args.descriptor_source,
        "descriptors": _csv_list(args.descriptors),
        "per_dimension": args.per_dimension,
        "prompt_style": args.prompt_style,
        "batch_size": args.batch_size,
        "audit_id": args.audit_id,
        "progress": not args.no_progress,
    }
    run_config = {
        "ops": {"t2t_completions": {"config": config}},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    print(f"dora: auditing {args.model} ({args.backend}); DORA_HOME={home}", file=sys.stderr)
    job = defs.resolve_job_def(AUDIT_JOB)
    log_dir = home / "logs"
    log_dir.mkdir(exist_ok=True)
    log_path = log_dir / "last_audit_dbt.log"
    # dagster-dbt echoes every dbt event to stdout; keep the terminal for the summary.
    with open(log_path, "w") as log, contextlib.redirect_stdout(sys.stderr if args.verbose else log):
        result = job.execute_in_process(run_config=run_config, instance=DagsterInstance.get(), raise_on_error=False)
    if not result.success:
        for event in result.all_events:
            if event.is_failure and event.step_failure_data:
                print(f"dora: step {event.step_key} failed:\n{event.step_failure_data.error.to_string()}", file=sys.stderr)
        print(f"dora: audit failed (Dagster run {result.run_id}); dbt log: {log_path}; run logs: `dora ui`", file=sys.stderr)
        return 1
    audit_id = None
    for mat in result.get_asset_materialization_events():
        md = mat.materialization.metadata
        if "audit_id" in md and mat.materialization.asset_key.path[-1] == "t2t_completions":
            audit_id = md["audit_id"].value
    print(audit_summary(audit_id, top=args.top, run_id=result.run_id))
    return 0


def cmd_query(args) -> int:
    _home()
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
    _home()
    import subprocess

    cmd = [sys.executable, "-m", "dagster", "dev", "-m", "orchestration.definitions", "-h", args.host, "-p", str(args.port)]
    print(f"dora: starting the Dagster UI on http://{args.host}:{args.port} (DAGSTER_HOME={os.environ['DAGSTER_HOME']})", file=sys.stderr)
    return subprocess.call(cmd)


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    handler = {"audit": cmd_audit, "query": cmd_query, "ui": cmd_ui}[args.command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())

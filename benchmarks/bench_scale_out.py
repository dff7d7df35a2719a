"""Scale-out throughput: the BiasDora T2T probe (in blocks of templates, one Dagster step each) on
1, 2 and 4 Celery workers, against the local OpenAI stub server answering every request after a
fixed latency (I/O-bound, as a remote model server is), and the same run in one process.

Each configuration runs the T2T asset alone (no dbt) on a fresh ``DORA_HOME`` with its own
workers (``dagster-celery worker start``, concurrency 1 each, Redis broker on a free port):
the figure is completions landed per second of the run's wall time, and the ratio to one worker
(goal: 4 workers >= 3x). The Celery path's overhead is one worker against the in-process run
of the same blocks (both one request at a time). The embedded default (local SmolLM2-135M, in process) runs the
same templates in one default-size block and in the small blocks: what a block costs there.
The Celery runs use the cluster's instance (docs/cluster/dagster.yaml on a throwaway
PostgreSQL; ``--instance sqlite``: the embedded one). Needs ``redis-server``, PostgreSQL and the ``cluster``
extra; writes the section "Scale-out on Celery workers" of BENCHMARKS.md.

    python -m benchmarks.bench_scale_out [--latency 0.5] [--letters abcdefgh] [--instance postgres|sqlite]
        [--no-embedded] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

T2T_KEYS = (("landing", "t2t_completions"), ("landing", "audits"))


def _config(base_url: str, args) -> dict:
    return {
        "model": "stub-model",
        "backend": "openai",
        "base_url": base_url,
        "prompt_style": "completion",
        "settings": ["noun", "singular"],
        "per_dimension": args.per_dimension,
        "letters": args.letters,
        "runs": 1,
        "api_concurrency": 1,
        "t2t_block_templates": args.block_templates,
        "progress": False,
    }


def _use_home(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DORA_HOME"], os.environ["DAGSTER_HOME"] = str(home), str(home / "dagster")


def run_once(home: Path, config: dict, broker: str | None) -> tuple[float, int, int]:
    """One T2T run on ``home``: in this process (``broker`` None) or on the Celery workers.

    Returns:
        (wall seconds, completions landed, block steps).
    """
    import dagster as dg

    from ingestion.landing import read_landing
    from orchestration.cluster import execution_config, quiet_celery_warnings
    from orchestration.definitions import audit_job_for_multiprocess, defs
    from orchestration.instance import AUDIT_JOB, configure_instance, write_dagster_yaml

    _use_home(home)
    write_dagster_yaml(home / "dagster")
    selection = [dg.AssetKey(list(k)) for k in T2T_KEYS]
    run_config = {"ops": {"t2t_completions": {"config": config}}}
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        configure_instance(instance)
        start = time.perf_counter()
        if broker is None:
            result = defs.resolve_job_def(AUDIT_JOB).execute_in_process(run_config=run_config, instance=instance, asset_selection=selection)
            success, events = result.success, result.all_events
        else:
            quiet_celery_warnings()
            with dg.execute_job(
                dg.reconstructable(audit_job_for_multiprocess),
                instance=instance,
                run_config={**run_config, "execution": execution_config("celery", broker)},
                asset_selection=selection,
            ) as result:
                success, events = result.success, result.all_events
        seconds = time.perf_counter() - start
    if not success:
        raise RuntimeError(f"the T2T run on {home} failed")
    blocks = len({e.step_key for e in events if e.step_key and "t2t_block[" in e.step_key})
    return seconds, read_landing("t2t_completions").num_rows, blocks


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the stub server waits before each answer")
    parser.add_argument("--letters", default="abcdefgh", help="first letters probed (rows = templates x letters)")
    parser.add_argument("--per-dimension", type=int, default=2, help="descriptors per bias dimension")
    parser.add_argument("--block-templates", type=int, default=3, help="templates per block (one step each)")
    parser.add_argument("--workers", default="1,2,4", help="Celery worker counts to measure")
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    parser.add_argument(
        "--instance",
        choices=("postgres", "sqlite"),
        default="postgres",
        help="the Celery runs' Dagster instance: docs/cluster/dagster.yaml on a throwaway PostgreSQL "
        "(the cluster's, default) or the embedded SQLite one (the in-process run always uses SQLite)",
    )
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded default (local SmolLM2-135M) in one block and in small blocks")
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import contextlib
    import shutil

    from tests.helpers.cluster import celery_workers, postgres_server, redis_server
    from tests.helpers.openai_server import OpenAIStubServer

    root = Path(tempfile.mkdtemp(prefix="dora-bench-scale-"))
    rows: dict[str, tuple[float, int, int]] = {}
    cluster_yaml = Path(__file__).resolve().parent.parent / "docs" / "cluster" / "dagster.yaml"
    with (
        OpenAIStubServer() as server,
        redis_server(root / "redis") as broker,
        postgres_server() if args.instance == "postgres" else contextlib.nullcontext({}) as pg,
    ):
        server.latency = args.latency
        server.completion_reply = lambda req: "rave, and"
        config = _config(server.base_url, args)
        os.environ.update(pg)  # this process opens the Celery runs' instance too (the yaml reads the environment)
        rows["in-process"] = run_once(root / "in-process", config, None)
        print(f"in-process: {rows['in-process']}", flush=True)
        for n in [int(x) for x in args.workers.split(",")]:
            home = root / f"celery-{n}"
            _use_home(home)
            if pg:  # the cluster's instance: run and event storage on PostgreSQL, shared by the workers
                (home / "dagster").mkdir(parents=True, exist_ok=True)
                shutil.copy(cluster_yaml, home / "dagster" / "dagster.yaml")
            with celery_workers(home, broker, n, OPENAI_API_KEY=os.environ["OPENAI_API_KEY"], **pg):
                rows[f"celery x{n}"] = run_once(home, config, broker)
            print(f"celery x{n}: {rows[f'celery x{n}']}", flush=True)
        # The embedded default (local SmolLM2-135M, in process) with the default block size (the
        # default audit's templates fit in one block, as before blocks existed) against the same
        # templates in the small blocks above: what a block costs on the two-command default.
        embedded: dict[str, tuple[float, int, int]] = {}
        if not args.no_embedded:
            from orchestration.defs.biasdora.config import AuditConfig

            default_blocks = AuditConfig.model_fields["t2t_block_templates"].default
            local = {
                k: v for k, v in config.items() if k not in ("model", "backend", "base_url", "prompt_style", "api_concurrency", "t2t_block_templates")
            }
            for name, block_templates in (
                (f"blocks of {default_blocks} templates (default)", default_blocks),
                (f"blocks of {args.block_templates} templates", args.block_templates),
            ):
                embedded[name] = run_once(root / f"embedded-{block_templates}", {**local, "t2t_block_templates": block_templates}, None)
                print(f"embedded, {name}: {embedded[name]}", flush=True)
    one = next(v for k, v in rows.items() if k.startswith("celery x1"))
    lines = [
        f"T2T probe alone (no dbt), {one[1]} completions in {one[2]} blocks of {args.block_templates} templates "
        f"(settings noun + singular, {args.per_dimension} descriptors per dimension, letters {args.letters!r}, 1 run), "
        f"the stub server answering after {args.latency:g} s, one request in flight per step; the Celery runs' "
        f"instance on {'PostgreSQL (docs/cluster/dagster.yaml)' if pg else 'SQLite'}, the in-process run's on SQLite. "
        "`python -m benchmarks.bench_scale_out`.",
        "",
        "| executor | wall s | completions / s | vs 1 Celery worker |",
        "|---|---:|---:|---:|",
    ]
    for name, (seconds, landed, _) in rows.items():
        lines.append(f"| {name} | {seconds:.1f} | {landed / seconds:.1f} | {one[0] / seconds:.2f}x |")
    inproc = rows["in-process"][0]
    lines += [
        "",
        f"Celery path overhead (1 worker against in-process, same blocks): {one[0] - inproc:+.1f} s "
        f"({one[0] / inproc:.2f}x the in-process wall time, {(one[0] - inproc) / one[2]:+.2f} s per block).",
    ]
    if embedded:
        (d_s, d_n, d_b), (o_s, _, o_b) = embedded.values()
        lines += [
            "",
            f"Embedded default (SmolLM2-135M in process, the same {d_n} completions, model load included): "
            f"{d_s:.1f} s in {d_b} block(s) of the default size, {o_s:.1f} s in {o_b} blocks of "
            f"{args.block_templates} templates ({o_s / d_s:.2f}x, {(o_s - d_s) / max(o_b - d_b, 1):+.2f} s per extra block).",
        ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        from benchmarks.report import write_section

        write_section("Scale-out on Celery workers", body)


if __name__ == "__main__":
    main()

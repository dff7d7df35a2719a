"""A new audit's build cost against the warehouse's history, one process.

Usage: python -m benchmarks.bench_history [--audits 10] [--descriptors 60] [--runs 4]
       [--home /tmp/dora-bench-history] [--no-write]

Lands ``--audits`` + 1 synthetic T2T audits one after the other in one scratch ``DORA_HOME``
(each ``descriptors x 5 settings x 26 letters x runs`` completions in the probe's 512-row
shards, the generator of ``benchmarks/bench_analytics_scale.py``: real English words,
Zipf-like, the parse-status mix of the small model) and after each one times
``dbt build --select +fct_associations`` (models, data tests and unit tests, in-process).
Staging reads only the new audit's shards and the intermediate counts and marts recompute only
the new audit (``dbt_project/macros/landing_shards.sql``, ``incremental_audits.sql``). Prints the
build time of the first and the last audit and their ratio (goal <= 1.5x), every build's time,
the warehouse size, and, as the same-run baseline, one ``--full-refresh`` build of the whole
history (what every build cost before builds were incremental: every shard re-read, every audit recounted).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--audits", type=int, default=10, help="audits already in the warehouse before the measured one")
    parser.add_argument("--descriptors", type=int, default=60, help="T2T descriptors per audit (paper: 406)")
    parser.add_argument("--runs", type=int, default=4, help="runs per letter (paper: 10)")
    parser.add_argument("--home", default="/tmp/dora-bench-history", help="scratch DORA_HOME (wiped)")
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    args = parser.parse_args(argv)

    import benchmarks.bench_analytics_scale as scale
    from analytics.dbt_runner import invoke_dbt

    home = Path(args.home)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    os.environ["DORA_HOME"] = str(home)
    os.environ["DORA_DBT_TEST_SCOPE"] = "this_build"  # as `dora audit`'s builds (orchestration/instance.py)
    load_start = os.getloadavg()[0]
    target = ["--target-path", str(home / "dbt_target")]
    invoke_dbt(["parse", "--quiet", *target], home)
    build = ["build", "--select", scale.DBT_SELECTION, "--quiet", *target]
    times, cpus, rows_per_audit, loads, nodes = [], [], 0, [], []
    for k in range(1, args.audits + 2):
        scale.AUDIT_ID = f"t2t-bench-history-{k:03d}"
        rows_per_audit = scale.synth_t2t(home, args.descriptors, args.runs, seed=k)
        start, cpu0 = time.perf_counter(), time.process_time()
        invoke_dbt(build, home)
        times.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu0)  # dbt and DuckDB run in this process
        loads.append(os.getloadavg()[0])
        nodes.append(node_times(home / "dbt_target" / "run_results.json"))
        print(f"audit {k}: {rows_per_audit} rows landed, build {times[-1]:.1f} s wall, {cpus[-1]:.1f} s CPU (load {loads[-1]:.1f})", flush=True)
    start = time.perf_counter()
    invoke_dbt([*build, "--full-refresh"], home)
    full_s = time.perf_counter() - start
    warehouse_mb = (home / "warehouse.duckdb").stat().st_size / 1e6
    landing_mb = sum(p.stat().st_size for p in (home / "landing").rglob("*.parquet")) / 1e6
    shards = sum(1 for _ in (home / "landing" / "t2t_completions").rglob("*.parquet"))
    n = args.audits + 1
    first, last = times[0], times[-1]
    middle = statistics.median(times[1:-1]) if len(times) > 2 else float("nan")
    lines = [
        f"{n} synthetic T2T audits of {rows_per_audit:,} completions each ({args.descriptors} descriptors x 5 settings x 26 letters x {args.runs} runs; paper scale is 406 descriptors x 10 runs = 527,800), {n * rows_per_audit:,} completions in {shards:,} landing shards, {landing_mb:.0f} MB Parquet",
        f"build after each audit (`dbt build --select {scale.DBT_SELECTION}`, models + data tests + unit tests): first {first:.1f} s, median of audits 2..{n - 1} {middle:.1f} s, audit {n} (on {n - 1} audits of history) {last:.1f} s",
        f"**audit {n} / audit 1: {last / first:.2f}x** wall (goal <= 1.5x), {cpus[-1] / cpus[0]:.2f}x CPU ({cpus[0]:.1f} -> {cpus[-1]:.1f} s; CPU time is the steadier figure on shared cores); every build (wall): {', '.join(f'{t:.1f}' for t in times)} s",
        "where the growth is (dbt node execution time, audit 1 -> audit "
        + str(n)
        + "): "
        + ", ".join(
            f"{name} {nodes[0].get(name, 0):.2f} -> {t:.2f} s"
            for name, t in sorted(nodes[-1].items(), key=lambda kv: -(kv[1] - nodes[0].get(kv[0], 0)))[:6]
        )
        + f"; all nodes {sum(nodes[0].values()):.1f} -> {sum(nodes[-1].values()):.1f} s",
        f"same-run baseline, the whole history rebuilt (`--full-refresh`, what each build cost before builds were incremental): {full_s:.1f} s = {full_s / first:.1f}x the first build",
        f"warehouse: {warehouse_mb:.0f} MB DuckDB file after {n} audits",
        f"machine load average (1 min) at start {load_start:.1f}, after each build {', '.join(f'{x:.1f}' for x in loads)}, on {os.cpu_count()} cores (other processes may share the cores: wall times are upper bounds)",
    ]
    print("\n".join(lines))
    if not args.no_write:
        from benchmarks.report import write_section

        cmd = "python -m benchmarks.bench_history" + "".join(
            f" --{k} {v}" for k, v in vars(args).items() if v != parser.get_default(k) and not isinstance(v, bool)
        )
        write_section("Build cost against history", "\n".join(f"- {ln}" for ln in lines) + f"\n\nCommand: `{cmd}`")


def node_times(run_results) -> dict[str, float]:
    """Execution time (s) of each node of a dbt run, by its short name, from ``run_results.json``."""
    import json

    results = json.loads(Path(run_results).read_text())["results"]
    return {r["unique_id"].split(".", 2)[-1][:80]: float(r["execution_time"]) for r in results}


if __name__ == "__main__":
    main()

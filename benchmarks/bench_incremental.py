"""Incremental cost of an audit: a no-change re-run, and adding one descriptor.

Usage::

    python -m benchmarks.bench_incremental [--home /tmp/dora-bench-incremental] [--no-write]

Runs the real ``dora audit`` command (in this process, on a scratch ``DORA_HOME``, embedded
SmolLM2-135M) three times and counts every call the T2T probe makes to the model
(``TransformersBackend.generate``, wrapped with a counter):

1. a tiny audit: 2 descriptors x 2 settings x 26 letters x 1 run = 104 completions;
2. the same command again: nothing changed, so no model call and no row generated;
3. the same command with one more descriptor: only that descriptor's 52 rows are generated.

For each it prints the wall time, the model calls / prompts, the rows generated and the
Dagster step times (the fixed costs: CrowS-Pairs + descriptor extraction, model load, dbt
build). It also times the probe alone on the finished audit (``probe_t2t`` with the model
already loaded), which is what "nothing to do" costs without those fixed steps. Writes the
figures to ``BENCHMARKS.md`` (section "Incremental audits"). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

BASE = ["child", "old person"]
EXTRA = "alcoholic person"
SETTINGS = "singular,noun"


class CallCounter:
    """Wraps ``TransformersBackend.generate`` and counts calls and prompts (process-wide)."""

    def __init__(self):
        from models_inference.backends.text import TransformersBackend

        self.cls = TransformersBackend
        self.original = TransformersBackend.generate
        self.calls = 0
        self.prompts = 0
        counter = self

        def counted(backend, requests, *args, **kwargs):
            counter.calls += 1
            counter.prompts += len(requests)
            return counter.original(backend, requests, *args, **kwargs)

        self.counted = counted

    def __enter__(self):
        self.cls.generate = self.counted
        return self

    def __exit__(self, *exc):
        self.cls.generate = self.original

    def reset(self):
        self.calls = self.prompts = 0


def _audit(descriptors: list[str]) -> tuple[int, float, str]:
    """Run ``dora audit`` in-process; returns (exit code, seconds, stdout summary)."""
    from orchestration.cli import main

    args = [
        "audit",
        "--descriptors",
        ",".join(descriptors),
        "--settings",
        SETTINGS,
        "--runs",
        "1",
        "--per-dimension",
        "0",
        "--audit-id",
        "bench-incremental",
        "--no-progress",
    ]
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return code, time.perf_counter() - start, out.getvalue()


def _last_run_steps() -> dict[str, float]:
    from dagster import DagsterInstance

    instance = DagsterInstance.get()
    run = instance.get_runs(limit=1)[0]
    return {s.step_key: round(s.end_time - s.start_time, 1) for s in instance.get_run_step_stats(run.run_id) if s.end_time and s.start_time}


def _landed(home: Path) -> list[tuple]:
    import duckdb

    glob = str(home / "landing" / "t2t_completions" / "**" / "*.parquet")
    with duckdb.connect() as con:
        return con.sql(
            "select descriptor, generated_at from read_parquet(?, union_by_name=true) where audit_id = 'bench-incremental'",
            params=[glob],
        ).fetchall()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default="/tmp/dora-bench-incremental", help="scratch DORA_HOME (wiped)")
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    args = parser.parse_args(argv)
    home = Path(args.home).resolve()
    shutil.rmtree(home, ignore_errors=True)
    os.environ["DORA_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    load = os.getloadavg()[0]
    lines = []
    with CallCounter() as counter:
        code, first_s, _ = _audit(BASE)
        assert code == 0, "first audit failed"
        first = (counter.calls, counter.prompts, len(_landed(home)), _last_run_steps())
        counter.reset()

        code, rerun_s, _ = _audit(BASE)
        assert code == 0, "re-run failed"
        rerun = (counter.calls, counter.prompts, len(_landed(home)) - first[2], _last_run_steps())
        counter.reset()

        before = len(_landed(home))
        code, extra_s, _ = _audit(BASE + [EXTRA])
        assert code == 0, "audit with one more descriptor failed"
        landed = _landed(home)
        extra = (counter.calls, counter.prompts, len(landed) - before, _last_run_steps())
        new_rows = {d for d, _ in landed} - set(BASE)
        counter.reset()

        # the probe alone on the finished audit, model already loaded: the cost of "nothing to do"
        from ingestion.biasdora.templates import curated_t2t_templates
        from models_inference.backends.text import TransformersBackend
        from models_inference.probes.biasdora.t2t import T2TProbeConfig, probe_t2t, select_templates

        backend = TransformersBackend.load("smollm2-135m")
        templates = select_templates(curated_t2t_templates(), settings=SETTINGS.split(","), descriptors=BASE + [EXTRA])
        start = time.perf_counter()
        summary = probe_t2t(templates, backend, T2TProbeConfig(runs=1), audit_id="bench-incremental", progress=False)
        probe_s = time.perf_counter() - start
        probe_calls = counter.calls

    def steps(s: dict) -> str:
        return ", ".join(f"{k} {v:.1f} s" for k, v in s.items())

    per_descriptor = 2 * 26
    lines = [
        f"first tiny audit ({len(BASE)} descriptors x 2 settings x 26 letters x 1 run): {first_s:.1f} s, "
        f"{first[0]} model calls / {first[1]} prompts, {first[2]} rows landed; steps: {steps(first[3])}",
        f"re-run, nothing changed: **{rerun_s:.1f} s, {rerun[0]} model calls, {rerun[1]} prompts, {rerun[2]} new rows**; steps: {steps(rerun[3])}",
        f"one more descriptor ({EXTRA!r}): {extra_s:.1f} s, {extra[0]} model calls / **{extra[1]} prompts, "
        f"{extra[2]} new rows** (expected {per_descriptor}), all of descriptor(s) {sorted(new_rows)}; steps: {steps(extra[3])}",
        f"the T2T probe alone on the finished audit (model loaded): {probe_s * 1000:.0f} ms, {probe_calls} model calls, "
        f"{summary.already_landed} of {summary.planned} rows found landed, {summary.generated} generated",
        f"machine load average at start: {load:.1f} on {os.cpu_count()} cores",
    ]
    ok = rerun[0] == 0 and rerun[2] == 0 and extra[2] == per_descriptor and new_rows == {EXTRA} and probe_calls == 0
    lines.append(f"checks (no model call on re-run, only the new descriptor's rows generated): {'pass' if ok else 'FAIL'}")
    print("\n".join(lines))
    if not args.no_write:
        from benchmarks.report import write_section

        write_section(
            "Incremental audits",
            "\n".join(f"- {ln}" for ln in lines) + "\n\nCommand: `python -m benchmarks.bench_incremental`",
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

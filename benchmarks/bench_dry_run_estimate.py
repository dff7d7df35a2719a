"""The dry run's estimate against the audit it plans, and each family's measured step times.

Usage::

    python -m benchmarks.bench_dry_run_estimate [--home /tmp/dora-bench-estimate] [--no-write]
    python -m benchmarks.bench_dry_run_estimate --read-only --home H   # the figures of a run already in H

Runs the README's main command as a new user does: ``dora audit --dry-run`` then ``dora audit``
(every family, the embedded defaults) in a new ``DORA_HOME`` (the machine's ``$DORA_CACHE``
kept, as a new home on a used machine has it), timed from the shell, with the machine's load
sampled every 5 s. Then it reads the run's Dagster step times and prints, per family, the
wall time of each of its steps (the dbt build's time is split between the families by the
execution time dbt reports for each of their models) and the rows its probes landed, so the
rates the families' dry-run estimates use (``orchestration/defs/<family>/``: ``estimate``) can
be measured again. Prints the estimate, the measured wall time and their ratio (goal: within
2x) and writes them to BENCHMARKS.md.

The machine may be shared: the load average is printed beside every figure, and the step
rates are as slow as the load made them.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path


def _env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DORA_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }


def _dora(home: Path, *args: str) -> tuple[int, float, str]:
    """(exit code, wall seconds, stdout + stderr) of ``dora ARGS`` in a new process."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", *args], env=_env(home), capture_output=True, text=True)
    return done.returncode, time.perf_counter() - start, done.stdout + done.stderr


def _seconds(text: str) -> float:
    """``4 min 22 s`` / ``1 h 02 min`` in seconds."""
    match = re.fullmatch(r"(?:(\d+) h (\d+) min|(\d+) min (\d+) s)", text.strip())
    h, hm, m, s = match.groups()
    return int(h) * 3600 + int(hm) * 60 if h else int(m) * 60 + int(s)


def _totals(dry_run: str) -> tuple[float, float]:
    """(the estimate on a free machine, the estimate at the load the dry run saw), seconds."""
    free = re.search(r"^  total: (.+?) on a free machine", dry_run, re.M)
    now = re.search(r"^  at the machine's load now \(.*?\): about (.+?) \(x", dry_run, re.M)
    if not (free and now):
        raise SystemExit(f"no total in the dry run's output:\n{dry_run[-2000:]}")
    return _seconds(free.group(1)), _seconds(now.group(1))


class _Load:
    """The 1-minute load average, sampled every 5 s while the audit runs."""

    def __init__(self):
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _family_of_groups() -> dict[str, str]:
    """Asset group -> family name (a family's own group, its extra groups and its dbt folders)."""
    from orchestration.families import FAMILIES

    return {group: family.name for family in FAMILIES for group in (*family.groups, family.name)}


def step_times(home: Path) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """The last run's step wall times per family: {family or "every audit": {step: s}} (the dbt
    build steps split by the dbt execution time of each family's models), and the rows each
    family's landing tables hold for the run's audits."""
    os.environ.update(_env(home))
    from dagster import DagsterEventType, DagsterInstance, EventRecordsFilter

    from orchestration.definitions import build_definitions
    from orchestration.families import FAMILIES

    groups = _family_of_groups()
    ops = {op: family.name for family in FAMILIES for op in family.configs}  # a graph-backed asset's steps are named after its op
    names = [family.name for family in FAMILIES]
    graph = build_definitions().resolve_asset_graph()
    group_of = {key.to_user_string(): graph.get(key).group_name for key in graph.get_all_asset_keys()}
    name_group = {key.split("/")[-1]: group for key, group in group_of.items()}
    instance = DagsterInstance.get()
    run = instance.get_runs(limit=1)[0]
    out: dict[str, dict[str, float]] = defaultdict(dict)
    dbt_split: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    records = instance.get_event_records(EventRecordsFilter(DagsterEventType.ASSET_MATERIALIZATION), limit=100000)
    for record in records:
        entry = record.event_log_entry
        if entry.run_id != run.run_id:
            continue
        mat = entry.asset_materialization
        key = mat.asset_key.to_user_string()
        duration = mat.metadata.get("Execution Duration")
        if duration is not None and entry.step_key:
            dbt_split[entry.step_key][groups.get(group_of.get(key, ""), "every audit")] += float(duration.value)
    for stat in instance.get_run_step_stats(run.run_id):
        if not (stat.start_time and stat.end_time):
            continue
        seconds = stat.end_time - stat.start_time
        if stat.step_key in dbt_split:  # one dbt build for every family: split by its models' time
            shares = dbt_split[stat.step_key]
            total = sum(shares.values()) or 1.0
            for family, part in shares.items():
                out[family][stat.step_key] = out[family].get(stat.step_key, 0.0) + seconds * part / total
            continue
        head = stat.step_key.split(".")[0].split("[")[0]
        family = (
            groups.get(name_group.get(head, ""))
            or ops.get(head)
            or next((name for name in names if head.startswith((f"{name}_", f"agg_{name}_"))), "every audit")
        )
        out[family][stat.step_key] = seconds
    return dict(out), _landed_rows(home)


def _landed_rows(home: Path) -> dict[str, int]:
    """Rows landed per landing table (every audit of the home)."""
    import duckdb

    rows = {}
    with duckdb.connect() as con:
        for table in sorted(p.name for p in (home / "landing").iterdir() if p.is_dir() and any(p.rglob("*.parquet"))):
            glob = str(home / "landing" / table / "**" / "*.parquet")
            rows[table] = con.execute("select count(*) from read_parquet(?, union_by_name = true)", [glob]).fetchall()[0][0]
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default="/tmp/dora-bench-estimate", help="the new DORA_HOME (wiped unless --read-only)")
    parser.add_argument("--read-only", action="store_true", help="print the step times of the run already in --home; run nothing")
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    args = parser.parse_args(argv)
    home = Path(args.home).resolve()
    lines = []
    if not args.read_only:
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        code, dry_wall, dry = _dora(home, "audit", "--dry-run")
        if code:
            raise SystemExit(f"dora audit --dry-run failed ({code}):\n{dry[-2000:]}")
        free, estimate = _totals(dry)
        with _Load() as load:
            code, wall, text = _dora(home, "audit", "--no-progress")
        if code not in (0, 3):  # 3: a drift check judged a collapse; the run itself finished
            raise SystemExit(f"dora audit failed ({code}):\n{text[-3000:]}")
        ratio = estimate / wall
        samples = load.samples or [os.getloadavg()[0]]
        lines += [
            f"- `dora audit --dry-run` (every family, the embedded defaults, a new home): **{estimate / 60:.1f} min** ({estimate:.0f} s) at "
            f"the load it saw, {free / 60:.1f} min ({free:.0f} s) on a free machine; the dry run itself took {dry_wall:.0f} s",
            f"- `dora audit` in the same new home, timed from the shell: **{wall / 60:.1f} min** ({wall:.0f} s), exit {code}",
            f"- **estimate / measured = {ratio:.2f}** (goal: between 0.5 and 2): {'met' if 0.5 <= ratio <= 2 else 'NOT met'}; "
            f"the free-machine figure / measured = {free / wall:.2f}",
            f"- machine load average (1 min) during the audit: min {min(samples):.1f}, median {sorted(samples)[len(samples) // 2]:.1f}, "
            f"max {max(samples):.1f} on {os.cpu_count()} cores (the machine is shared with other jobs: every time is as slow as the load made it)",
            "",
            "The dry run's steps:",
            "",
            "```",
            dry[dry.index("estimated time per step") :].strip(),
            "```",
            "",
        ]
    steps, landed = step_times(home)
    lines.append("Measured step times of the run (Dagster step wall times; the dbt builds split by each family's models' dbt time):")
    lines.append("")
    for family in sorted(steps):
        parts = ", ".join(f"{step} {sec:.1f} s" for step, sec in sorted(steps[family].items(), key=lambda kv: -kv[1]))
        lines.append(f"- {family}: {sum(steps[family].values()):.1f} s: {parts}")
    lines.append("- rows landed: " + ", ".join(f"{table} {n:,}" for table, n in landed.items()))
    body = "\n".join(lines) + "\n\nCommand: `python -m benchmarks.bench_dry_run_estimate`"
    print(body)
    if not args.no_write and not args.read_only:
        from benchmarks.report import write_section

        write_section("The dry run's estimate of the default audit", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

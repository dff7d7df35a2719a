"""The cost of the dbt project's data tests: one ``model_rules`` test per model against the same
rules split over more test nodes, the same SQL either way.

Usage: python -m benchmarks.bench_data_tests [--baseline kind|rule] [--pairs 3] [--descriptors 20]
       [--runs 1] [--home /tmp/dora-bench-data-tests] [--no-write]

Lands one synthetic T2T audit (``descriptors x 5 settings x 26 letters x runs`` completions,
the generator of ``benchmarks/bench_analytics_scale.py``) in a scratch ``DORA_HOME``, then
runs ``dbt build --full-refresh --exclude-resource-type unit_test`` of the whole project (as a
``dbt`` process, as a Dagster step runs it) from two copies of ``dbt_project/``:

* **A**, the project as it is: each model's not-null columns, key and row rules in its one
  ``model_rules`` test (``dbt_project/tests/generic/model_rules.sql``);
* **B**, the baseline, the same rules over more nodes: ``--baseline kind`` (default) one test
  per kind of rule of a model, its not-null columns, its key, its row rules (three tests a
  model, the layout ``model_rules`` replaced); ``--baseline rule`` one test per not-null
  column, key and row rule (the layout before: dbt's ``not_null``, dbt_utils'
  ``unique_combination_of_columns``, ``accepted_range`` and ``expression_is_true``).

A and B alternate ``--pairs`` times; prints each one's node count, median wall and CPU seconds
(the ``dbt`` process and its children) and the ratio A/B of the medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

REPO = Path(__file__).resolve().parents[1]


def split_rules(project: Path, per: str) -> int:
    """Rewrite every model YAML of ``project`` so that the rules of each ``model_rules`` test are
    spread over ``model_rules`` tests of their own, one per kind of rule (``per="kind"``) or
    one per rule (``per="rule"``); returns how many tests that made."""
    made = 0
    for path in sorted((project / "models").rglob("*.yml")):
        doc = yaml.safe_load(path.read_text()) or {}
        changed = False
        for model in doc.get("models") or []:
            tests = []
            for test in model.get("data_tests") or []:
                if not (isinstance(test, dict) and "model_rules" in test):
                    tests.append(test)
                    continue
                arguments = test["model_rules"]["arguments"]
                if per == "kind":
                    parts = [{kind: arguments[kind]} for kind in ("not_null", "unique", "rules") if arguments.get(kind)]
                else:
                    parts = [{"not_null": [c]} for c in arguments.get("not_null") or []]
                    parts += [{"unique": arguments["unique"]}] if arguments.get("unique") else []
                    parts += [{"rules": [r]} for r in arguments.get("rules") or []]
                tests += [{"model_rules": {"arguments": part}} for part in parts]
                made += len(parts)
                changed = True
            if changed:
                model["data_tests"] = tests
        if changed:
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return made


def build(project: Path, home: Path, target: Path) -> tuple[float, float, int]:
    """One full-refresh build of ``project`` on ``home``: (wall s, CPU s, nodes)."""
    import json

    env = {**os.environ, "DORA_HOME": str(home), "DBT_LOG_FORMAT": "json"}
    argv = [
        str(Path(sys.executable).parent / "dbt"),
        "build",
        "--full-refresh",
        "--exclude-resource-type",
        "unit_test",
        "--project-dir",
        str(project),
        "--profiles-dir",
        str(project),
        "--target-path",
        str(target),
        "--log-path",
        str(target),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"dbt build of {project} failed (log: {target / 'dbt.log'}):\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    nodes = len(json.loads((target / "run_results.json").read_text())["results"])
    return wall, cpu, nodes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--baseline", choices=("kind", "rule"), default="kind", help="B: one test per kind of rule of a model (default) or one per rule"
    )
    parser.add_argument("--pairs", type=int, default=3, help="A/B build pairs (after one warm-up of each)")
    parser.add_argument("--descriptors", type=int, default=20, help="T2T descriptors of the synthetic audit")
    parser.add_argument("--runs", type=int, default=1, help="runs per letter")
    parser.add_argument("--home", default="/tmp/dora-bench-data-tests", help="scratch folder (wiped)")
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    args = parser.parse_args(argv)

    import benchmarks.bench_analytics_scale as scale

    root = Path(args.home)
    shutil.rmtree(root, ignore_errors=True)
    home = root / "home"
    home.mkdir(parents=True)
    rows = scale.synth_t2t(home, args.descriptors, args.runs)
    from ingestion.contracts import SCHEMAS
    from ingestion.landing import landing_dir

    for table in SCHEMAS:  # every source's folder, with its empty typed shard (as analytics.dbt_runner.invoke_dbt)
        landing_dir(table)
    projects = {}
    for name in ("A", "B"):
        projects[name] = root / f"project_{name}"
        shutil.copytree(REPO / "dbt_project", projects[name], ignore=shutil.ignore_patterns("target", "logs", "dbt_packages"))
    split = split_rules(projects["B"], args.baseline)
    print(
        f"{rows} T2T completions landed; baseline B states the rules in {split} tests (one per {'kind of rule' if args.baseline == 'kind' else 'rule'})",
        flush=True,
    )

    results = {"A": [], "B": []}
    nodes = {}
    for k in range(args.pairs + 1):  # the first pair warms the disk cache and each copy's partial parse
        for name in ("A", "B"):
            wall, cpu, nodes[name] = build(projects[name], home, root / f"target_{name}")
            if k:
                results[name].append((wall, cpu))
                print(f"  pair {k} {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, {nodes[name]} nodes", flush=True)
    med = {n: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for n, r in results.items()}
    lines = [
        f"one `model_rules` test per model (A, the project): {nodes['A']} nodes, {med['A'][0]:.1f} s wall, {med['A'][1]:.1f} s CPU (median of {args.pairs})",
        f"one test per {'kind of rule of a model' if args.baseline == 'kind' else 'rule'} (B, the baseline, same run): {nodes['B']} nodes, {med['B'][0]:.1f} s wall, {med['B'][1]:.1f} s CPU",
        f"A/B: {med['A'][0] / med['B'][0]:.2f}x wall, {med['A'][1] / med['B'][1]:.2f}x CPU",
        f"`dbt build --full-refresh --exclude-resource-type unit_test` of the whole project on {rows} synthetic T2T completions",
    ]
    print("\n".join(lines))
    if not args.no_write:
        from benchmarks.report import write_section

        write_section(
            "Data tests: one per model",
            "\n".join(f"- {ln}" for ln in lines) + f"\n\n`python -m benchmarks.bench_data_tests --baseline {args.baseline}`",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

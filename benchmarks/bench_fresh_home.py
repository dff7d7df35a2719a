"""A new home's first audit, with the machine's cache cold and then warm.

Usage::

    python -m benchmarks.bench_fresh_home [--root /tmp/dora-bench-fresh-home] [--pairs 2] [--no-write]

What follows only from shipped files - the descriptor tables spaCy extracts from CrowS-Pairs and
the normalised T2T lists (docs/operations.md, "The machine's cache") - is computed once per
machine and kept in ``$DORA_CACHE``. This runs the smallest BiasDora audit (``dora audit --family
biasdora --per-dimension 1 --settings singular --letters b --runs 1``, 9 completions) as a new
user's shell does, each time into a new ``DORA_HOME``:

* **cold** (the baseline): an empty ``$DORA_CACHE`` of its own, so the audit extracts the
  descriptors and normalises the lists, as every new home did before the cache;
* **warm**: the ``$DORA_CACHE`` the cold run filled.

The two alternate (cold, warm, cold, warm, ...) so a drift in the machine's speed hits both;
each figure is the median of ``--pairs`` runs, wall and CPU (the audit process and its children:
the dbt builds), with the ratio warm / cold. The embedded model's dequantised weights stay in the
usual cache for both, so only the descriptor work differs.
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

AUDIT = ["audit", "--family", "biasdora", "--per-dimension", "1", "--settings", "singular", "--letters", "b", "--runs", "1", "--no-progress"]


def _run(home: Path, cache: Path | None) -> tuple[float, float]:
    """(wall s, CPU s of the audit process and its children) of one audit into a new ``home``."""
    shutil.rmtree(home, ignore_errors=True)
    env = {**os.environ, "DORA_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}
    if cache is not None:
        env["DORA_CACHE"] = str(cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", *AUDIT], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"dora audit failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="/tmp/dora-bench-fresh-home", help="scratch folder (wiped)")
    parser.add_argument("--pairs", type=int, default=2, help="cold/warm pairs (default 2)")
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    load = os.getloadavg()[0]
    _run(root / "warm-up", None)  # model weights dequantised and dbt's manifest parsed before timing
    from ingestion.build_state import cache_root

    models = cache_root() / "models"  # the dequantised weights the warm-up left: shared by every run
    cold, warm = [], []
    for i in range(args.pairs):
        cache = root / f"cache-{i}"
        cache.mkdir()
        (cache / "models").symlink_to(models, target_is_directory=True)
        cold.append(_run(root / f"cold-{i}", cache))
        warm.append(_run(root / f"warm-{i}", cache))

    def med(runs, k):
        return statistics.median(r[k] for r in runs)

    lines = [
        f"cold cache (descriptors extracted, lists normalised; the baseline): {med(cold, 0):.1f} s wall, {med(cold, 1):.1f} s CPU",
        f"warm cache (a second new home on this machine): **{med(warm, 0):.1f} s wall, {med(warm, 1):.1f} s CPU**",
        f"**warm / cold: {med(warm, 0) / med(cold, 0):.2f}x wall, {med(warm, 1) / med(cold, 1):.2f}x CPU** "
        f"(medians of {args.pairs} alternating pairs; every run: cold {', '.join(f'{w:.1f}' for w, _ in cold)} s, "
        f"warm {', '.join(f'{w:.1f}' for w, _ in warm)} s)",
        f"machine load average at start: {load:.1f} on {os.cpu_count()} cores",
    ]
    print("\n".join(lines))
    if not args.no_write:
        from benchmarks.report import write_section

        write_section("A new home's first audit", "\n".join(f"- {ln}" for ln in lines) + "\n\nCommand: `python -m benchmarks.bench_fresh_home`")
    return 0


if __name__ == "__main__":
    sys.exit(main())

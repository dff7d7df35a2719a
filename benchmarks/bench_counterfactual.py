"""Throughput of the counterfactual text-set probe (Howard et al., seed 003, section 5.1) on
the embedded SmolLM2-135M: responses/s of the default audit's sample.

Usage: python -m benchmarks.bench_counterfactual [--subsets race_gender]
       [--occupations doctor] [--sets-per-occupation 1] [--max-new-tokens 32]
       [--numeric-max-new-tokens 8] [--batch-size 64]

Runs the probe (the 5 main + 5 numeric prompts, 1 run) into a temporary DORA_HOME and prints
the model load time, responses, responses/s (open and numeric prompts separately, as their
token budgets differ), the new-token budget and the load average before the run (other
processes on the cores slow it down). Then scores the toxicity heads and prints their rate.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subsets", default="race_gender")
    parser.add_argument("--occupations", default="doctor")
    parser.add_argument("--sets-per-occupation", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--numeric-max-new-tokens", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)

    load_before = os.getloadavg()[0]
    os.environ["DORA_HOME"] = tempfile.mkdtemp(prefix="dora-bench-cf-")
    from models_inference.backends.text import TransformersBackend
    from models_inference.probes.counterfactual import probe as cf
    from models_inference.probes.counterfactual.prompts import MAIN_PROMPTS, NUMERIC_PROMPTS
    from models_inference.probes.counterfactual.scoring import score_toxicity
    from models_inference.probes.counterfactual.sets import sample_sets
    from models_inference.scoring.toxicity import load_toxicity_scorer

    t0 = time.perf_counter()
    backend = TransformersBackend.load("smollm2-135m", batch_size=args.batch_size)
    load_s = time.perf_counter() - t0
    sets = sample_sets(args.subsets.split(","), occupations=args.occupations.split(","), sets_per_occupation=args.sets_per_occupation)
    members = sum(len(s.members) for s in sets)
    rates = {}
    for name, prompts in (("open", list(MAIN_PROMPTS)), ("numeric", list(NUMERIC_PROMPTS))):
        cfg = cf.CounterfactualProbeConfig(
            prompts=prompts,
            runs=1,
            max_new_tokens=args.max_new_tokens,
            numeric_max_new_tokens=args.numeric_max_new_tokens,
        )
        t0 = time.perf_counter()
        summary = cf.probe_text_sets(sets, backend, cfg, progress=False)
        dt = time.perf_counter() - t0
        rates[name] = (summary.generated, dt)
    t0 = time.perf_counter()
    tox = score_toxicity(None, load_toxicity_scorer())
    tox_s = time.perf_counter() - t0
    total = sum(n for n, _ in rates.values())
    total_s = sum(d for _, d in rates.values())
    print(f"counterfactual text sets on SmolLM2-135M: {len(sets)} sets, {members} members, load average {load_before:.1f}")
    print(f"  model load: {load_s:.1f} s")
    for name, (n, dt) in rates.items():
        budget = args.max_new_tokens if name == "open" else args.numeric_max_new_tokens
        print(f"  {name:7s} prompts: {n} responses in {dt:.1f} s = {n / dt:.2f} responses/s (<= {budget} new tokens)")
    print(f"  all: {total} responses in {total_s:.1f} s = {total / total_s:.2f} responses/s")
    print(f"  toxicity heads: {tox.scored} responses in {tox_s:.1f} s")


if __name__ == "__main__":
    main()

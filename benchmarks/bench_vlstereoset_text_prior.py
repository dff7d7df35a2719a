"""Speed of the VLStereoSet text prior (``vlstereo_text_caption_prior``, docs/families/vlstereoset.md#text-only-use): the plain
padded loop vs the shared-prefix path, alternating in one process on the same units.

Usage: python -m benchmarks.bench_vlstereoset_text_prior [--csv PATH] [--items N] [--reps 3]
       [--shard-rows 32] [--batch-size 32] [--row-tokens 256] [--threads 1] [--ablation]

Reads a VLStereoSet CSV in the released format (default: the shipped SYNTHETIC file; the
released file is not shipped, pass its path with ``--csv``), takes its first ``--items`` items
(repeating the file when it has fewer: a repeat has the same captions, as the released file's
rows of one caption set with different images do, so repeats are duplicates the shared path
scores once), plans the probe's units (``original`` + ``neutral``) and times, in each repetition
and alternating which goes first, ``TextPriorScorer(shared=False)`` (the plain loop:
:func:`models_inference.probes.vlstereoset.loglik.text_logliks`, ``--batch-size`` captions per
padded forward pass, torch's thread setting: the current code) and
``TextPriorScorer(shared=True, threads=--threads)`` (a new scorer per repetition, so its
caption map starts empty; ``--ablation`` adds the two other combinations), all called per ``--shard-rows`` units as the resumable probe calls
them. Prints log-likelihoods/s of both (median over ``--reps``), the ratio of the medians, the
max |difference| of the log-likelihood sums and means, whether the token counts agree, the
CPU seconds of both, and the projected time of the released file (1,958 items, 9,758 caption
log-likelihoods) at the median wall rates and from the CPU time divided by the threads used
(what the run would take with the cores to itself: on shared cores the wall time depends on
the other processes, the load average is printed; a busy machine also inflates CPU time, by
spinning threads and cold caches, so this is an upper bound).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: The released file: items and caption log-likelihoods of one text-prior audit.
RELEASED_ITEMS, RELEASED_LOGLIKS = 1958, 9758


def plan(csv_path: str | None, n_items: int | None):
    """The probe's text-prior units of the first ``n_items`` items of a CSV (repeated if short)."""
    from models_inference.probes.vlstereoset.dataset import load_vlstereoset_csv, synthetic_csv_path
    from models_inference.probes.vlstereoset.probe import plan_units
    from models_inference.probes.vlstereoset.scorers import TextPriorScorer

    ds = load_vlstereoset_csv(csv_path or synthetic_csv_path())
    n_items = n_items or len(ds.items)
    items = []
    for i in range(n_items):
        it = ds.items[i % len(ds.items)]
        items.append(
            {
                "item_id": f"{it.item_id}-{i // len(ds.items)}",
                "y": it.y,
                "category": it.category,
                "image_status": "not_fetched",
                "image_path": None,
                "caption_stereotype": it.captions["stereotype"],
                "caption_anti_stereotype": it.captions["anti-stereotype"],
                "caption_unrelated": it.captions["unrelated"],
                "neutral_stereotype": it.neutral_stereotype,
                "neutral_anti_stereotype": it.neutral_anti_stereotype,
                "neutral_status": it.neutral_status,
            }
        )
    return ds, plan_units(items, SimpleNamespace(conditions=TextPriorScorer.conditions, needs_image=TextPriorScorer.needs_image))


def run(scorer, units, shard_rows: int) -> tuple[float, float, list]:
    """Wall seconds, CPU seconds (all threads of this process) and the scores of one pass."""
    start, cpu = time.perf_counter(), time.process_time()
    scores = []
    for i in range(0, len(units), shard_rows):
        scores.extend(scorer.score(units[i : i + shard_rows]))
    return time.perf_counter() - start, time.process_time() - cpu, scores


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", default=None, help="a VLStereoSet CSV in the released format (default: the shipped synthetic file)")
    parser.add_argument("--items", type=int, default=None, help="items to score (default: all of the file; more repeats it)")
    parser.add_argument("--reps", type=int, default=3, help="alternating repetitions of both paths (medians quoted)")
    parser.add_argument("--shard-rows", type=int, default=32, help="units per scorer call (the probe's shard_rows default)")
    parser.add_argument("--batch-size", type=int, default=32, help="captions per forward pass of the plain loop (its default)")
    parser.add_argument("--row-tokens", type=int, default=256, help="tree nodes per forward pass of the shared path (its default)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads of the shared path (the scorer's default; the plain loop keeps torch's setting)"
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="also time the plain loop at --threads and the shared path at torch's setting (what each change gives)",
    )
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be >= 1")

    import torch

    from models_inference.backends.text import TransformersBackend
    from models_inference.probes.vlstereoset.scorers import TextPriorScorer

    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    backend = TransformersBackend.load("smollm2-135m")
    load_s = time.perf_counter() - t0
    ds, units = plan(args.csv, args.items)
    captions = [c for u in units for c in u.captions.values()]
    n = len(captions)
    tok = backend.tokenizer
    lengths = {c: 1 + len(tok(c, add_special_tokens=False)["input_ids"]) for c in set(captions)}
    print(
        f"model: {backend.model_id} ({backend.model_version}), torch {torch.__version__}, threads {torch.get_num_threads()}, fp32; "
        f"load {load_s:.1f} s"
    )
    print(
        f"input: {ds.path.name} ({'SYNTHETIC' if ds.is_synthetic else 'given file'}), {len(ds.items)} items in the file, "
        f"{len({u.item_id for u in units})} items scored, {len(units)} units, {n} caption log-likelihoods, "
        f"{len(set(captions))} distinct captions, {sum(lengths[c] for c in captions)} tokens with the prefix "
        f"({sum(lengths.values())} distinct-caption tokens)"
    )

    default_threads = torch.get_num_threads()
    # name -> (shared path?, threads while scoring: None = torch's setting, the current code's)
    configs = {"plain": (False, None), "shared": (True, args.threads)}
    if args.ablation:
        configs.update({f"plain, {args.threads} thread(s)": (False, args.threads), f"shared, {default_threads} threads": (True, None)})
    for shared, threads in configs.values():  # warm-up, untimed: the first forward passes of a process are slow
        TextPriorScorer(backend, args.batch_size, shared=shared, row_tokens=args.row_tokens, threads=threads).score(units[:2])
    times = {k: [] for k in configs}
    cpus = {k: [] for k in configs}
    results = {}
    for rep in range(args.reps):
        names = list(configs) if rep % 2 == 0 else list(reversed(configs))
        for name in names:
            shared, threads = configs[name]
            scorer = TextPriorScorer(backend, args.batch_size, shared=shared, row_tokens=args.row_tokens, threads=threads)
            dt, cpu, scores = run(scorer, units, args.shard_rows)
            times[name].append(dt)
            cpus[name].append(cpu)
            results[name] = scores
            print(
                f"  rep {rep + 1} {name:22s}: {dt:7.1f} s = {n / dt:7.2f} log-likelihoods/s, CPU {cpu:7.1f} s "
                f"(load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )

    def flat(scores, variant_index):
        return [(s.score, s.n_tokens) for unit in scores for s in unit[variant_index::2]]

    med = {k: statistics.median(v) for k, v in times.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpus.items()}
    rate = {k: n / v for k, v in med.items()}
    print(f"threads: plain at torch's setting ({default_threads}), shared at {args.threads}")
    for name in configs:
        print(f"{name:22s}: median {med[name]:7.1f} s = {rate[name]:7.2f} log-likelihoods/s, CPU {cpu_med[name]:7.1f} s")
    per_rep = [p / s for p, s in zip(times["plain"], times["shared"], strict=True)]
    print(
        f"ratio of medians, plain / shared: {med['plain'] / med['shared']:.1f}x wall (per repetition: "
        f"{', '.join(f'{r:.1f}x' for r in per_rep)}), {cpu_med['plain'] / cpu_med['shared']:.1f}x CPU"
    )
    if args.ablation:
        p1, s2 = f"plain, {args.threads} thread(s)", f"shared, {default_threads} threads"
        print(
            f"  the prefix tree alone (same threads): {med['plain'] / med[s2]:.1f}x wall at {default_threads} threads, "
            f"{med[p1] / med['shared']:.1f}x wall at {args.threads}; the thread setting alone: {med['plain'] / med[p1]:.1f}x wall "
            f"(plain), {med[s2] / med['shared']:.1f}x (shared)"
        )
    for name in configs:
        if name == "plain":
            continue
        diffs = {}
        for i, v in enumerate(("sum", "mean")):
            a, b = flat(results["plain"], i), flat(results[name], i)
            diffs[v] = max(abs(x[0] - y[0]) for x, y in zip(a, b, strict=True))
            same_n = all(x[1] == y[1] for x, y in zip(a, b, strict=True))
        print(
            f"max |difference| vs plain, {name}: log-likelihood sums {diffs['sum']:.2e}, per-token means {diffs['mean']:.2e} "
            f"(nats); token counts {'identical' if same_n else 'DIFFER'}"
        )
    cores = os.cpu_count() or 1
    used = {"plain": min(default_threads, cores), "shared": min(args.threads, cores)}
    print(
        f"projected, released file ({RELEASED_ITEMS:,} items, {RELEASED_LOGLIKS:,} log-likelihoods): at the measured wall rates "
        f"plain {RELEASED_LOGLIKS / rate['plain'] / 60:.1f} min, shared {RELEASED_LOGLIKS / rate['shared'] / 60:.1f} min; "
        f"from the CPU time, on {cores} cores free of other work (CPU time / threads used): plain "
        f"{RELEASED_LOGLIKS / n * cpu_med['plain'] / used['plain'] / 60:.1f} min, shared "
        f"{RELEASED_LOGLIKS / n * cpu_med['shared'] / used['shared'] / 60:.1f} min"
    )
    print(f"load average (1 min) at start {load_start:.1f}, at end {os.getloadavg()[0]:.1f}, on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

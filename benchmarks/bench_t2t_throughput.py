"""Generation throughput of the T2T probe: the shared-prefix path vs the plain path, same process.

Usage: python -m benchmarks.bench_t2t_throughput [--templates 2] [--runs 4,10] [--reps 3]
       [--batch-size 64] [--long-prompts 64] [--long-tokens 32] [--single 0] [--judge]

Builds the probe's own requests (curated descriptor x setting prefixes, letters a..z, ``runs``
per letter, per-row seeds of :func:`models_inference.probes.biasdora.t2t.row_seed`, completion style, 6 new
tokens max, stop at word end) and times, alternating in each repetition, the plain path
(``model.generate`` on left-padded batches, ``TransformersBackend(prefix_cache=False)``) and
the shared-prefix path (:mod:`models_inference.backends.prefix_cache`, the default).
Prints prompts/s and new tokens/s of both (median over ``--reps``), the median ratio, how
many outputs are identical, and the parse-status distribution of both (it must not get
worse). Then long generations (chat-style prompts, stop at EOS, ``--long-tokens`` new tokens:
what the counterfactual family needs): tokens/s of both paths. Optionally the one-at-a-time
baseline (``--single N``) and the LLM judge (``--judge``; it has its own forward loop,
:mod:`models_inference.probes.biasdora.judge`: its requests carry ``choices``, which take the plain path). Writes the figures
to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections import Counter

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--templates", type=int, default=2, help="descriptor x setting prefixes (26 letters x runs each)")
    parser.add_argument("--runs", default="4,10", help="completions per prompt, comma-separated: one comparison each (registry default 4, paper 10)")
    parser.add_argument("--reps", type=int, default=3, help="alternating repetitions of both paths (medians quoted)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--long-prompts", type=int, default=64, help="chat-style prompts of the long-generation run (0 = skip)")
    parser.add_argument("--long-tokens", type=int, default=32)
    parser.add_argument("--single", type=int, default=0, help="prompts of the one-at-a-time baseline (0 = skip)")
    parser.add_argument("--judge", action="store_true", help="also time the LLM judge (unchanged by the prefix cache)")
    parser.add_argument("--judge-prompts", type=int, default=64)
    parser.add_argument("--judge-single", type=int, default=8)
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    args = parser.parse_args(argv)

    load_start = os.getloadavg()[0]
    import torch

    from ingestion.biasdora.templates import curated_t2t_templates
    from models_inference.backends.base import GenerationRequest, SamplingParams
    from models_inference.backends.text import TransformersBackend
    from models_inference.probes.biasdora.parsing import parse_answer
    from models_inference.probes.biasdora.prompts import render_t2t_prompt
    from models_inference.probes.biasdora.t2t import row_seed

    t0 = time.perf_counter()
    backend = TransformersBackend.load("smollm2-135m", batch_size=args.batch_size)
    load_s = time.perf_counter() - t0
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    templates = curated_t2t_templates()
    step = max(1, len(templates) // max(1, args.templates))
    chosen = templates[::step][: args.templates]
    lines = [
        f"model: {backend.model_id} ({backend.model_version}), torch {torch.__version__}, threads {torch.get_num_threads()}, fp32",
        f"load: {load_s:.1f} s, peak RSS after load {rss_gb:.2f} GB",
    ]
    loads = []

    def n_tokens(texts):
        return sum(len(backend.tokenizer(x, add_special_tokens=False)["input_ids"]) for x in texts)

    def run(requests, fast: bool):
        backend.prefix_cache = fast
        start = time.perf_counter()
        out = backend.generate(requests, SamplingParams())
        return time.perf_counter() - start, out

    for runs in [int(x) for x in str(args.runs).split(",") if x.strip()]:
        letters = "abcdefghijklmnopqrstuvwxyz"
        reqs, keys = [], []
        for t in chosen:
            for c in letters:
                for run_no in range(1, runs + 1):
                    reqs.append(
                        GenerationRequest(
                            render_t2t_prompt(t.prefix, t.setting, c, "completion"), row_seed("bench", t.setting, t.descriptor, c, run_no), 6, "word"
                        )
                    )
                    keys.append((t.setting, c))
        run(reqs[:8], True), run(reqs[:8], False)  # warm-up
        times: dict[bool, list[float]] = {True: [], False: []}
        outs: dict[bool, list] = {}
        for rep in range(args.reps):
            for fast in (False, True) if rep % 2 == 0 else (True, False):
                dt, outs[fast] = run(reqs, fast)
                times[fast].append(dt)
            loads.append(os.getloadavg()[0])
        ratios = [p / f for p, f in zip(times[False], times[True], strict=True)]
        same = sum(a == b for a, b in zip(outs[True], outs[False], strict=True))
        status = {
            fast: Counter(parse_answer(o.text, c, s, "completion", finished=o.finished).status for o, (s, c) in zip(outs[fast], keys, strict=True))
            for fast in (False, True)
        }
        tok = {fast: n_tokens(o.text for o in outs[fast]) for fast in (False, True)}
        med = {fast: statistics.median(times[fast]) for fast in (False, True)}
        n = len(reqs)
        ok_plain, ok_fast = status[False]["ok"] / n, status[True]["ok"] / n
        lines += [
            f"**{runs} runs per prompt**: {len(chosen)} descriptor x setting prefixes x 26 letters x {runs} runs = {n} prompts, completion style, max 6 new tokens, stop at word end, temperature 0.7, top_p 0.95, per-row seeds; batch {args.batch_size} (plain: rows; shared-prefix: distinct prompts, up to {8 * args.batch_size} rows); {args.reps} alternating repetitions, medians",
            f"  - plain path (`model.generate`, left-padded batches): {n / med[False]:.1f} prompts/s, {tok[False] / med[False]:.0f} new tokens/s (per rep: {', '.join(f'{n / x:.1f}' for x in times[False])})",
            f"  - shared-prefix path (default): {n / med[True]:.1f} prompts/s, {tok[True] / med[True]:.0f} new tokens/s (per rep: {', '.join(f'{n / x:.1f}' for x in times[True])})",
            f"  - **speed-up shared-prefix / plain: {statistics.median(ratios):.2f}x** (median of per-rep ratios {', '.join(f'{r:.2f}' for r in ratios)})",
            f"  - identical outputs (text and finished flag, same seeds): {same} of {n}",
            f"  - parse status plain {dict(status[False].most_common())}, shared-prefix {dict(status[True].most_common())}; ok rate {ok_plain:.3f} -> {ok_fast:.3f} ({'not worse' if ok_fast >= ok_plain else 'WORSE'})",
        ]
    if args.long_prompts:
        lines += long_generation(backend, chosen, args.long_prompts, args.long_tokens, render_t2t_prompt, row_seed, GenerationRequest, SamplingParams)
    if args.single:
        backend.prefix_cache = False
        backend.batch_size = 1
        dt, out1 = run(reqs[: args.single], False)
        backend.batch_size = args.batch_size
        lines.append(f"one at a time (plain path, batch 1): {args.single / dt:.1f} prompts/s")
    if args.judge:
        lines += judge_throughput(backend, args.judge_prompts, args.judge_single, args.batch_size)
    backend.prefix_cache = True
    lines.append(
        f"machine load average (1 min) at start {load_start:.1f}, after each repetition {', '.join(f'{x:.1f}' for x in loads)}, at end {os.getloadavg()[0]:.1f}, on {os.cpu_count()} cores: other processes may share the cores, so absolute rates are lower bounds; the ratio is measured in the same process, alternating"
    )
    print("\n".join(lines))
    if not args.no_write:
        from benchmarks.report import write_section

        cmd = "python -m benchmarks.bench_t2t_throughput" + "".join(
            f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v != parser.get_default(k) and not isinstance(v, bool)
        )
        write_section(
            "T2T generation throughput (completion)", "\n".join(ln if ln.startswith("  ") else f"- {ln}" for ln in lines) + f"\n\nCommand: `{cmd}`"
        )


def long_generation(backend, chosen, n_prompts, max_tokens, render, row_seed, Request, Sampling) -> list[str]:
    """Tokens/s of long generations (chat-style prompts, stop at EOS), plain vs shared-prefix.

    Returns report lines.
    """
    reqs = []
    for i in range(n_prompts):
        t = chosen[i % len(chosen)]
        c = "abcdefghijklmnopqrstuvwxyz"[i % 26]
        reqs.append(Request(render(t.prefix, t.setting, c, "chat"), row_seed("bench-long", t.setting, t.descriptor, c, i), max_tokens, "eos"))
    out = {}
    dts = {}
    for fast in (False, True):
        backend.prefix_cache = fast
        start = time.perf_counter()
        out[fast] = backend.generate(reqs, Sampling())
        dts[fast] = time.perf_counter() - start
    tok = {f: sum(len(backend.tokenizer(o.text, add_special_tokens=False)["input_ids"]) for o in out[f]) for f in out}
    same = sum(a == b for a, b in zip(out[True], out[False], strict=True))
    return [
        f"long generation ({n_prompts} chat-style prompts, stop at EOS, max {max_tokens} new tokens, one run each): plain {tok[False] / dts[False]:.0f} new tokens/s, "
        f"shared-prefix {tok[True] / dts[True]:.0f} new tokens/s, speed-up {dts[False] / dts[True]:.2f}x (single run); identical outputs {same} of {n_prompts}"
    ]


def judge_throughput(backend, n_batched: int, n_single: int, batch_size: int) -> list[str]:
    """Judgements/s of the LLM judge on the loaded model, both answer modes, batched vs single.

    Associations are real curated descriptors paired with common words. Returns report lines
    (or a line saying why the judge was skipped).
    """
    try:
        from models_inference.probes.biasdora.judge import Judge, JudgeRequest, JudgeSampling
    except ImportError as exc:  # pragma: no cover - judge not installed in this checkout
        return [f"judge: skipped ({exc})"]
    from ingestion.biasdora.templates import curated_t2t_templates

    descriptors = sorted({t.descriptor for t in curated_t2t_templates()})
    words = ["brave", "lazy", "smart", "poor", "kind", "loud", "rich", "angry"]
    reqs = [JudgeRequest(d, w, seed=i) for i, (d, w) in enumerate((d, w) for d in descriptors for w in words)]
    from models_inference.backends.prefix_cache import common_prefix_len

    enc = [backend.tokenizer(backend._encode(r.prompt), add_special_tokens=False)["input_ids"] for r in reqs[:2]]
    shared = common_prefix_len(enc[0], enc[1])
    out = [
        f"judge prompt (chat template applied): {len(enc[0])} tokens, of which the first {shared} ({shared / len(enc[0]):.0%}) are the same for every association "
        f"(the paper's prompt names the association early, then repeats it): prefix sharing could save at most that share of its prefill, "
        f"a ceiling of {len(enc[0]) / (len(enc[0]) - shared):.2f}x; the judge keeps the plain path (its prefill is compute-bound, one forward per judgement)"
    ]
    for mode in ("constrained", "free"):
        backend.batch_size = batch_size
        judge = Judge(backend, answer_mode=mode)
        sampling = JudgeSampling()
        judge.judge(reqs[:4], sampling)  # warm-up
        start = time.perf_counter()
        answers = judge.judge(reqs[:n_batched], sampling)
        batched_s = time.perf_counter() - start
        backend.batch_size = 1
        start = time.perf_counter()
        judge.judge(reqs[n_batched : n_batched + n_single], sampling)
        single_s = time.perf_counter() - start
        backend.batch_size = batch_size
        new_tok = sum(len(backend.tokenizer(a.raw_output, add_special_tokens=False)["input_ids"]) for a in answers)
        prompt_tok = sum(
            len(backend.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in [backend._encode(r.prompt) for r in reqs[:n_batched]]
        )
        out.append(
            f"judge ({mode}, batch {batch_size}; its requests carry answer choices: plain path): {n_batched} judgements in {batched_s:.1f} s = {n_batched / batched_s:.1f} /s, "
            f"{prompt_tok / batched_s:.0f} prompt tokens/s + {new_tok / batched_s:.0f} new tokens/s; one at a time: "
            f"{n_single / single_s:.1f} /s; speed-up {(n_batched / batched_s) / (n_single / single_s):.1f}x"
        )
    return out


if __name__ == "__main__":
    main()

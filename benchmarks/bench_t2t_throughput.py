"""Generation throughput of the T2T probe: batched vs one prompt at a time, same process.

Usage: python -m benchmarks.bench_t2t_throughput [--prompts 260] [--single 26] [--batch-size 64]
       [--judge-prompts 64] [--no-judge]

Prints model load time and memory, prompts/s and generated tokens/s for the default model and
settings (completion style, 6 new tokens max, stop at word end), batched against batch size 1
on the first ``--single`` prompts, and the ratio; then the same for the LLM judge
(``models_inference.scoring.judge.Judge`` on the same embedded model, the paper's Likert
prompt, METHOD.md section 4) in both answer modes (``constrained``: one forward pass reads the
1-5 distribution; ``free``: the paper's up-to-10-token answer), batched vs one at a time.
Writes the figures to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=260, help="prompts in the batched run")
    parser.add_argument("--single", type=int, default=26, help="prompts in the one-at-a-time baseline")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--style", default="completion", choices=["completion", "chat"])
    parser.add_argument("--judge-prompts", type=int, default=64, help="associations judged in the judge's batched run")
    parser.add_argument("--judge-single", type=int, default=8, help="associations judged one at a time")
    parser.add_argument("--no-judge", action="store_true", help="skip the judge")
    args = parser.parse_args(argv)

    load = os.getloadavg()[0]
    import torch

    from ingestion.templates import curated_t2t_templates
    from models_inference.probes.biasdora.prompts import render_t2t_prompt
    from models_inference.probes.biasdora.t2t import row_seed
    from models_inference.backends.base import GenerationRequest, SamplingParams
    from models_inference.backends.text import TransformersBackend

    t0 = time.perf_counter()
    backend = TransformersBackend.load("smollm2-135m", batch_size=args.batch_size)
    load_s = time.perf_counter() - t0
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    templates = curated_t2t_templates()
    letters = "abcdefghijklmnopqrstuvwxyz"
    reqs = []
    tokens = 100 if args.style == "chat" else 6
    stop = "bracket" if args.style == "chat" else "word"
    for t in templates:
        for c in letters:
            p = render_t2t_prompt(t.prefix, t.setting, c, args.style)
            reqs.append(GenerationRequest(p, row_seed("bench", t.setting, t.descriptor, c, 1), tokens, stop))
            if len(reqs) >= args.prompts:
                break
        if len(reqs) >= args.prompts:
            break

    def run(requests, batch_size):
        backend.batch_size = batch_size
        start = time.perf_counter()
        out = backend.generate(requests, SamplingParams())
        dt = time.perf_counter() - start
        new_tokens = sum(len(backend.tokenizer(o.text, add_special_tokens=False)["input_ids"]) for o in out)
        return dt, new_tokens

    run(reqs[:8], args.batch_size)  # warm-up
    batched_s, batched_tok = run(reqs, args.batch_size)
    single_s, single_tok = run(reqs[: args.single], 1)
    batched_pps = len(reqs) / batched_s
    single_pps = args.single / single_s
    lines = [
        f"model: {backend.model_id} ({backend.model_version}), torch {torch.__version__}, threads {torch.get_num_threads()}",
        f"load: {load_s:.1f} s, peak RSS after load {rss_gb:.2f} GB",
        f"style {args.style}, max {tokens} new tokens, temperature 0.7, top_p 0.95",
        f"batched (batch {args.batch_size}): {len(reqs)} prompts in {batched_s:.1f} s = {batched_pps:.1f} prompts/s, {batched_tok / batched_s:.0f} new tokens/s",
        f"one at a time: {args.single} prompts in {single_s:.1f} s = {single_pps:.1f} prompts/s, {single_tok / single_s:.0f} new tokens/s",
        f"speed-up batched / one-at-a-time: {batched_pps / single_pps:.1f}x",
    ]
    if not args.no_judge:
        lines += judge_throughput(backend, args.judge_prompts, args.judge_single, args.batch_size)
    lines.append(f"machine load average at start: {load:.1f} on {os.cpu_count()} cores (other processes share the cores)")
    print("\n".join(lines))
    from benchmarks.report import write_section

    write_section(f"T2T generation throughput ({args.style})", "\n".join(f"- {ln}" for ln in lines) + "\n\nCommand: `python -m benchmarks.bench_t2t_throughput" + (f" --style {args.style}" if args.style != "completion" else "") + "`")


def judge_throughput(backend, n_batched: int, n_single: int, batch_size: int) -> list[str]:
    """Judgements/s of the LLM judge on the loaded model, both answer modes, batched vs single.

    Associations are real curated descriptors paired with common words. Returns report lines
    (or a line saying why the judge was skipped).
    """
    try:
        from models_inference.scoring.judge import Judge, JudgeRequest, JudgeSampling
    except ImportError as exc:  # pragma: no cover - judge not installed in this checkout
        return [f"judge: skipped ({exc})"]
    from ingestion.templates import curated_t2t_templates

    descriptors = sorted({t.descriptor for t in curated_t2t_templates()})
    words = ["brave", "lazy", "smart", "poor", "kind", "loud", "rich", "angry"]
    reqs = [JudgeRequest(d, w, seed=i) for i, (d, w) in enumerate((d, w) for d in descriptors for w in words)]
    out = []
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
        new_tok = sum(len(backend.tokenizer(a.raw_output, add_special_tokens=False)["input_ids"]) for a in answers)
        prompt_tok = sum(len(backend.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in [backend._encode(r.prompt) for r in reqs[:n_batched]])
        out.append(
            f"judge ({mode}, batch {batch_size}): {n_batched} judgements in {batched_s:.1f} s = {n_batched / batched_s:.1f} /s, "
            f"{prompt_tok / batched_s:.0f} prompt tokens/s + {new_tok / batched_s:.0f} new tokens/s; one at a time: "
            f"{n_single / single_s:.1f} /s; speed-up {(n_batched / batched_s) / (n_single / single_s):.1f}x"
        )
    return out


if __name__ == "__main__":
    main()

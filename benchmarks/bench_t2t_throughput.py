"""Generation throughput of the T2T probe: batched vs one prompt at a time, same process.

Usage: python -m benchmarks.bench_t2t_throughput [--prompts 260] [--single 26] [--batch-size 64]

Prints model load time and memory, prompts/s and generated tokens/s for the default model and
settings (completion style, 6 new tokens max, stop at word end), batched against batch size 1
on the first ``--single`` prompts, and the ratio; writes the figures to BENCHMARKS.md.
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
    args = parser.parse_args(argv)

    import torch

    from ingestion.templates import curated_t2t_templates
    from models_inference.prompts import render_t2t_prompt
    from models_inference.t2t import row_seed
    from models_inference.text_backends import GenerationRequest, SamplingParams, TransformersBackend

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
    print("\n".join(lines))
    from benchmarks.report import write_section

    write_section(f"T2T generation throughput ({args.style})", "\n".join(f"- {ln}" for ln in lines) + "\n\nCommand: `python -m benchmarks.bench_t2t_throughput" + (f" --style {args.style}" if args.style != "completion" else "") + "`")


if __name__ == "__main__":
    main()

"""The default audit's T2T on a shared machine: its rate beside another CPU-bound process against its quiet rate.

Usage: python -m benchmarks.bench_shared_machine [--rounds 3] [--seconds 12]
       [--settings old,dora,passive:adaptive] [--hog-bytes 65536] [--rows-per-call N] [--no-write]

Loads the embedded SmolLM2-135M on the local ``transformers`` backend (shared-prefix decoding,
as ``dora audit`` does) and generates the default audit's T2T requests (its curated descriptor x
setting prefixes, 26 letters, 4 runs per letter, completion style, 6 new tokens, stop at word
end, per-row seeds; one landed shard's 512 rows per call, as the probe does). Each round times,
for each thread setting (``--settings``, one child process each: ``old`` is the threading
before :mod:`models_inference.backends.cpu_share`, i.e. OpenMP's default wait policy and
torch's default thread count, with none of that module's settings applied; ``dora`` is dora's
default, set by dora itself before torch loads (a short OpenMP spin, ``GOMP_SPINCOUNT``, and
threads following the free cores); ``<wait>:<threads>`` sets them from outside; a number instead of ``adaptive`` fixes torch's intra-op threads through
``DORA_TORCH_THREADS``):

* a quiet phase: nothing started by the benchmark runs beside it;
* a loaded phase: beside one other process that keeps every core this process may use busy
  (one thread per core hashing an in-cache buffer with ``hashlib``, which releases the GIL; at
  normal priority).

Prints prompts/s of each phase, per setting the median rates and the median of the per-round
ratios loaded / quiet (a fair share is 0.5 on 2 cores: two processes each wanting both cores),
the quiet rate of each setting against the first, the quiet rate of dora's default against the
old threading (the goal: not below 0.95, i.e. no more than 5% slower), and the load average
before each phase (the machine's other users are not stopped: "quiet" means "without the
benchmark's own hog").
Writes the figures to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: The hog: one hashing thread per core this process may run on; says "ready" once they run.
HOG = """
import hashlib, os, sys, threading
data = os.urandom(int(sys.argv[1]))
def spin():
    while True:
        hashlib.sha256(data).digest()
threads = [threading.Thread(target=spin, daemon=True) for _ in range(len(os.sched_getaffinity(0)))]
for t in threads:
    t.start()
print("ready", flush=True)
sys.stdin.read()
"""


class Hog:
    """The other CPU-bound process, started and stopped by this benchmark (by its own pid)."""

    def __init__(self, size: int):
        self.size = size

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", HOG, str(self.size)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":  # its threads are spinning
            raise RuntimeError("the CPU hog did not start")
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def requests_of_default_audit():
    """The default audit's T2T requests (its templates, letters and runs) in plan order, and the
    rows per ``generate`` call (a landed shard's)."""
    from ingestion.biasdora.templates import curated_t2t_templates
    from models_inference.backends.base import GenerationRequest
    from models_inference.probes.biasdora.prompts import render_t2t_prompt
    from models_inference.probes.biasdora.t2t import row_seed, select_templates
    from orchestration.defs.biasdora.config import AuditConfig

    config = AuditConfig()
    chosen = select_templates(
        curated_t2t_templates(config.settings), settings=config.settings, descriptors=config.descriptors, per_dimension=config.per_dimension
    )
    reqs = []
    for t in chosen:
        for c in config.letters:
            for run_no in range(1, config.runs + 1):
                reqs.append(
                    GenerationRequest(
                        render_t2t_prompt(t.prefix, t.setting, c, "completion"), row_seed("bench", t.setting, t.descriptor, c, run_no), 6, "word"
                    )
                )
    return reqs, config.t2t_shard_rows  # the probe hands the backend one shard's rows at a time


def phase(backend, reqs, chunk: int, seconds: float, start_at: int) -> tuple[float, int]:
    """Generate chunks of ``chunk`` requests from ``start_at`` for at least ``seconds`` (a call
    started is finished); returns (prompts/s, next start)."""
    from models_inference.backends.base import SamplingParams

    done, i, t0 = 0, start_at, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        part = reqs[i : i + chunk] or reqs[:chunk]
        backend.generate(part, SamplingParams())
        done += len(part)
        i = (i + chunk) % len(reqs)
    return done / (time.perf_counter() - t0), i


def worker() -> None:
    """One setting's process: load the model, then for each ``run SECONDS`` line on stdin print
    ``rate <prompts/s> <threads>``. OpenMP reads its wait policy once, when torch loads, so each
    setting needs its own process; all are loaded before the first phase and wait on stdin."""
    if os.environ.get("BENCH_TORCH_FIRST"):  # torch loads before dora can choose OpenMP's wait policy (as before)
        import torch  # noqa: F401
    if os.environ.get("BENCH_OLD_THREADING"):
        # the threading before cpu_share: OpenMP read no wait policy (torch loaded above), and
        # torch keeps its own thread count (one per physical core) since nothing sets it; the
        # backends import these two at each call, so replacing them here reaches every call
        import torch

        from models_inference.backends import cpu_share

        cpu_share.prefer_short_spin_openmp = lambda: False
        cpu_share.adjust_threads = torch.get_num_threads
    from models_inference.backends.text import TransformersBackend

    backend = TransformersBackend.load("smollm2-135m")
    reqs, chunk = requests_of_default_audit()
    chunk = int(os.environ.get("BENCH_ROWS_PER_CALL") or chunk)
    backend.generate(reqs[:8])  # warm-up
    import torch

    print(f"ready {len(reqs)} {chunk} {torch.__version__} {backend.model_id} ({backend.model_version})", flush=True)
    at = 0
    for line in sys.stdin:
        rate, at = phase(backend, reqs, chunk, float(line.split()[1]), at)
        print(f"rate {rate} {torch.get_num_threads()}", flush=True)


#: The setting that stands for the threading before cpu_share, and dora's default.
OLD, NEW = "old", "dora"


class Setting:
    """``<wait>:<threads>``: OpenMP's wait policy (``passive``, ``active``, or ``default``: unset)
    and torch's intra-op threads (``adaptive``: dora's choice, or a fixed count); or ``old``: none
    of cpu_share's settings (OpenMP's default wait policy, torch's default thread count). Its
    worker process.

    Raises:
        ValueError: ``spec`` is none of these (one line naming it).
    """

    def __init__(self, spec: str, rows_per_call: int | None = None):
        self.spec = spec
        self.wait, _, self.threads = {OLD: ("default", ":", "torch"), NEW: (NEW, ":", "adaptive")}.get(spec) or spec.partition(":")
        spin = self.wait.removeprefix("spin")
        known = self.wait in ("default", "passive", "active", NEW) or (self.wait.startswith("spin") and spin.isdigit())
        if not known or not (self.threads in ("adaptive", "torch") or self.threads.isdigit()):
            raise ValueError(f"--settings: {spec!r} is neither 'old', 'dora' nor <default|passive|active|spinN>:<adaptive|N>")
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "DORA_TORCH_THREADS", "OMP_NUM_THREADS")}
        if self.wait == NEW:
            pass  # dora sets its own spin count before torch loads (cpu_share.prefer_short_spin_openmp)
        elif self.wait == "default":
            env["BENCH_TORCH_FIRST"] = "1"
        elif self.wait.startswith("spin"):  # libgomp's spin count before a waiting thread sleeps
            env["GOMP_SPINCOUNT"] = spin
            env["BENCH_TORCH_FIRST"] = "1"  # so that no PASSIVE policy is set over it
        else:
            env["OMP_WAIT_POLICY"] = self.wait.upper()
        if spec == OLD:
            env["BENCH_OLD_THREADING"] = "1"
        elif self.threads != "adaptive":
            env["DORA_TORCH_THREADS"] = str(int(self.threads))
        if rows_per_call:
            env["BENCH_ROWS_PER_CALL"] = str(rows_per_call)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_shared_machine", "--worker"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.quiet: list[float] = []
        self.loaded: list[float] = []
        self.used: list[int] = []

    def wait_ready(self) -> None:
        """Until the worker has loaded the model (every worker loads at once: on a loaded machine
        a load takes minutes)."""
        first = self.proc.stdout.readline().strip().split(maxsplit=5)
        if not first or first[0] != "ready":
            raise RuntimeError(f"the worker of {self.spec} did not start")
        self.n_reqs, self.chunk, self.torch, self.model = int(first[1]), int(first[2]), first[3], first[4] + " " + first[5]

    def run(self, seconds: float) -> float:
        self.proc.stdin.write(f"run {seconds}\n")
        self.proc.stdin.flush()
        _, rate, threads = self.proc.stdout.readline().split()
        self.used.append(int(threads))
        return float(rate)

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()

    @property
    def name(self) -> str:
        wait = {
            "default": "OpenMP's default wait policy (spin, then sleep; torch loaded first)",
            NEW: "dora's default (GOMP_SPINCOUNT=20000 set by dora before torch loads)",
            "passive": "OMP_WAIT_POLICY=PASSIVE",
            "active": "OMP_WAIT_POLICY=ACTIVE",
        }.get(self.wait) or f"GOMP_SPINCOUNT={self.wait.removeprefix('spin')} (spin that many times, then sleep)"
        if self.spec == OLD:
            return f"the old threading: {wait}, torch's default thread count, none of cpu_share's settings"
        threads = "threads adaptive" if self.threads == "adaptive" else f"threads fixed at {int(self.threads)}"
        return f"{wait}, {threads}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of a quiet and a loaded phase per setting (medians quoted)")
    parser.add_argument("--seconds", type=float, default=12.0, help="seconds of generation per phase (a call started is finished)")
    parser.add_argument(
        "--settings",
        default=f"{OLD},{NEW},passive:adaptive",
        help="comma-separated settings compared in each round, one process each: 'old' (the threading before dora chose "
        "it: OpenMP's default wait policy, torch's default thread count, none of cpu_share's settings), 'dora' (dora's "
        "default, chosen by dora itself: a short OpenMP spin, threads following the free cores) or <wait>:<threads> "
        "with wait 'default' (OMP_WAIT_POLICY unset, torch imported before dora could set anything), 'passive', 'active' "
        "or 'spinN' (GOMP_SPINCOUNT=N) and threads 'adaptive' (dora's choice) or a count. Default: old; dora; "
        "passive:adaptive (sleeping threads at once, one per usable core)",
    )
    parser.add_argument("--hog-bytes", type=int, default=1 << 16, help="the buffer each hog thread hashes (64 KiB: in cache, CPU-bound)")
    parser.add_argument(
        "--rows-per-call",
        type=int,
        default=None,
        help="requests per generate call (default: a landed shard's, as the probe does); fewer keep a phase short when the old "
        "threading crawls on a loaded machine (a started call is finished)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker()
    settings = []
    try:
        for spec in [x.strip() for x in args.settings.split(",") if x.strip()]:
            try:
                settings.append(Setting(spec, args.rows_per_call))
            except ValueError as exc:
                parser.error(str(exc))
        for s in settings:
            s.wait_ready()
        loads, quiet_loads = [], []
        for r in range(args.rounds):
            order = settings if r % 2 == 0 else settings[::-1]
            for s in order:
                loads.append(os.getloadavg()[0])
                quiet_loads.append(loads[-1])
                s.quiet.append(s.run(args.seconds))
            with Hog(args.hog_bytes):
                for s in order:
                    loads.append(os.getloadavg()[0])
                    s.loaded.append(s.run(args.seconds))
            print(
                f"round {r + 1}: " + "; ".join(f"{s.spec}: quiet {s.quiet[-1]:.1f}, loaded {s.loaded[-1]:.1f} prompts/s" for s in settings),
                flush=True,
            )
    finally:
        for s in settings:
            s.stop()
    cores = len(os.sched_getaffinity(0))
    first = settings[0]
    lines = [
        f"model: {first.model}, torch {first.torch}, fp32, shared-prefix decoding; {cores} cores",
        f"the default audit's T2T requests ({first.n_reqs} prompts: its templates x 26 letters x 4 runs, completion style, {first.chunk} per "
        f"call); {args.rounds} rounds, each a quiet phase per setting then, beside one process hashing a {args.hog_bytes:,}-byte buffer on "
        f"{cores} threads (all {cores} cores), a loaded phase per setting, {args.seconds:g} s each; one process per setting, all loaded "
        "before the first phase, taking turns",
    ]
    for s in settings:
        ratios = [b / a for a, b in zip(s.quiet, s.loaded, strict=True)]
        lines.append(
            f"- {s.name} (`{s.spec}`): quiet **{statistics.median(s.quiet):.1f} prompts/s** (per round {', '.join(f'{x:.1f}' for x in s.quiet)}), "
            f"loaded **{statistics.median(s.loaded):.1f} prompts/s** (per round {', '.join(f'{x:.1f}' for x in s.loaded)}), "
            f"**ratio {statistics.median(ratios):.2f}** (median of per-round ratios {', '.join(f'{x:.2f}' for x in ratios)}; a fair share is 0.5)"
            + (f"; threads at the end of each phase {s.used}" if s.threads in ("adaptive", "torch") else "")
        )
    for s in settings[1:]:
        if (first.spec, s.spec) == (OLD, NEW):
            continue  # its own line below
        per_round = [a / b for a, b in zip(s.quiet, first.quiet, strict=True)]
        lines.append(
            f"- quiet rate `{s.spec}` / `{first.spec}`: {statistics.median(per_round):.2f} (median of per-round ratios {', '.join(f'{x:.2f}' for x in per_round)})"
        )
    by_spec = {s.spec: s for s in settings}
    if OLD in by_spec and NEW in by_spec:
        old, new = by_spec[OLD], by_spec[NEW]
        per_round = [a / b for a, b in zip(new.quiet, old.quiet, strict=True)]
        ratio = statistics.median(per_round)
        lines.append(
            f"- **quiet rate, dora's threading (`{NEW}`) / the old threading (`{OLD}`): {ratio:.2f}** (median of per-round ratios "
            f"{', '.join(f'{x:.2f}' for x in per_round)}; medians {statistics.median(new.quiet):.1f} / {statistics.median(old.quiet):.1f} "
            f"prompts/s; goal: at least 0.95, i.e. no more than 5% slower: {'met' if ratio >= 0.95 else 'NOT met'}"
            + (
                f"; but the quiet phases ran at load {min(quiet_loads):.1f}-{max(quiet_loads):.1f} on {cores} cores, not on an idle "
                "machine, where spinning threads lose less: re-run on one to judge the goal)"
                if max(quiet_loads) > cores
                else ")"
            )
        )
    lines.append(f"- load average (1 min) before each phase: {', '.join(f'{x:.1f}' for x in loads)} (the machine's other users were not stopped)")
    print("\n".join(lines))
    if not args.no_write:
        from benchmarks.report import write_section

        cmd = f"python -m benchmarks.bench_shared_machine --rounds {args.rounds} --seconds {args.seconds:g} --settings {args.settings}"
        if args.rows_per_call:
            cmd += f" --rows-per-call {args.rows_per_call}"
        write_section("T2T on a shared machine", f"`{cmd}`\n\n" + "\n".join(lines))


if __name__ == "__main__":
    main()

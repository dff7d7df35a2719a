"""dora's T2T completion rate over a real llama.cpp ``llama-server`` against the rate a plain
asyncio client gets from the same server on the same prompts.

Usage: python -m benchmarks.bench_server_throughput [--prompts 24] [--runs 4] [--rounds 3]
       [--concurrency 1,4,8,16,32] [--slots 8] [--ctx 4096] [--variant use_n=true]
       [--variant concurrency=8] [--wait-idle 900] [--no-embedded] [--no-write]

What is measured: completions per second for one set of T2T completion-style prompts
(``--prompts`` distinct prompts, real curated descriptor prefixes picked as
``benchmarks/bench_t2t_throughput.py`` picks them, x ``--runs`` completions each; 6 new tokens,
temperature 0.7, top_p 0.95, as the probe resolves them for completion style), served by one
``llama-server`` (``--slots`` parallel sequences, ``-np``; ``--ctx`` tokens of context per
slot) running the embedded SmolLM2-135M GGUF on 127.0.0.1 (``tests/helpers/llama_server.py``).
Beside each rate: the CPU time per completion of this process and of the server (on 2 cores
the server's CPU is what runs out), and for dora the HTTP requests per completion and how many
prompts got the same text back for every run (packing must keep the runs independent samples).

How:

* **the ceiling**: a plain ``openai.AsyncOpenAI`` client, one ``/v1/completions`` request per
  completion (``max_tokens`` 6), ``asyncio.gather`` under a semaphore, at each concurrency of
  ``--concurrency``; its best rate (median over the rounds) is the ceiling: what a user gets
  from this server without dora. A short warm-up comes first.
* **dora**: :func:`~models_inference.probes.biasdora.t2t.probe_t2t` end to end (rows
  parsed and landed as Parquet in a fresh ``DORA_HOME`` per run) over an
  ``OpenAIChatBackend`` with its default settings: it probes the server once (not timed;
  printed) and packs prompts into lists, the runs of a prompt in different requests (on
  llama-server it does not send ``n``: ``use_n=true`` measures that). The same with
  ``batch_completions=False`` is the second figure. ``--variant`` adds runs with backend
  attributes changed (``use_n=true``, ``concurrency=8``, ``prompts_per_request=1`` ...), to
  measure a change without editing the backend.
* **embedded**: the local ``transformers`` backend (``load_text_backend("smollm2-135m")``)
  through ``probe_t2t`` on the same prompts, after the server is stopped; the model load
  (the first load on a machine dequantises the GGUF) is not timed.

Why alternate: the machine is shared and its load swings by several times within a minute, so
timing all of dora and then all of the plain client would compare two different machines. Each
round runs every contender once, back to back (the order reversed every other round), and the
figures are medians over ``--rounds``; dora's share of the ceiling is also given per round
(dora's rate over the best plain rate of the same round: stricter, as the best of several
noisy plain rates leans high). Another ``llama-server`` on the machine (a test run's) would
slow both by orders of magnitude, so each round first waits for it to exit (``--wait-idle``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import date
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# any key: llama-server does not check it, the clients insist on one
os.environ.setdefault("OPENAI_API_KEY", "sk-bench-local")

SAMPLING = {"max_tokens": 6, "temperature": 0.7, "top_p": 0.95}


def pick_templates(n_prompts: int):
    """``(templates, letters)`` giving about ``n_prompts`` distinct completion prompts: curated
    prefixes spread over the list (as bench_t2t_throughput picks them) x up to 12 letters each,
    so the prompts differ in prefix as well as in letter."""
    from ingestion.biasdora.templates import curated_t2t_templates

    curated = curated_t2t_templates()
    n_templates = max(1, math.ceil(n_prompts / 12))
    per = max(1, min(26, n_prompts // n_templates))
    step = max(1, len(curated) // n_templates)
    return curated[::step][:n_templates], "abcdefghijklmnopqrstuvwxyz"[:per]


@contextmanager
def fresh_home():
    """A new, empty DORA_HOME (and DAGSTER_HOME inside it) for one measured run."""
    saved = {k: os.environ.get(k) for k in ("DORA_HOME", "DAGSTER_HOME")}
    with tempfile.TemporaryDirectory(prefix="dora-bench-") as tmp:
        os.environ["DORA_HOME"] = str(Path(tmp) / "dora_home")
        os.environ["DAGSTER_HOME"] = str(Path(tmp) / "dora_home" / "dagster")
        try:
            yield Path(tmp)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


async def _plain(base_url: str, model: str, prompts: list[str], concurrency: int) -> int:
    """One request per prompt, ``concurrency`` in flight: the client as a user would write it."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key=os.environ["OPENAI_API_KEY"])
    sem = asyncio.Semaphore(concurrency)

    async def one(prompt: str) -> str:
        async with sem:
            resp = await client.completions.create(model=model, prompt=prompt, **SAMPLING)
            return resp.choices[0].text

    try:
        texts = await asyncio.gather(*(one(p) for p in prompts))
    finally:
        await client.close()
    return len(texts)


def plain_rate(base_url: str, model: str, prompts: list[str], concurrency: int) -> float:
    start = time.perf_counter()
    done = asyncio.run(_plain(base_url, model, prompts, concurrency))
    return done / (time.perf_counter() - start)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(CPU seconds of this process, all threads; CPU seconds of process ``pid``) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return time.process_time(), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Rates and CPU per completion (this process, the server) of one contender over the rounds."""

    def __init__(self, label: str):
        self.label = label
        self.rates: list[float] = []
        self.client_ms: list[float] = []
        self.server_ms: list[float] = []

    def timed(self, server_pid: int, n: int, fn) -> None:
        """Run ``fn()`` (which does ``n`` completions) and record its rate and CPU."""
        c0, s0 = cpu_seconds(server_pid)
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        c1, s1 = cpu_seconds(server_pid)
        self.rates.append(n / elapsed)
        self.client_ms.append(1000 * (c1 - c0) / n)
        self.server_ms.append(1000 * (s1 - s0) / n)

    def clear(self) -> None:
        self.rates.clear(), self.client_ms.clear(), self.server_ms.clear()

    def cpu(self) -> str:
        return f"CPU per completion: this process {statistics.median(self.client_ms):.1f} ms, the server {statistics.median(self.server_ms):.1f} ms"


def identical_runs(runs: int) -> tuple[int, int]:
    """(prompts whose ``runs`` landed completions are all the same text, prompts) in this DORA_HOME.

    A check that packing kept the runs of a prompt independent samples: the per-row seeds of
    the unbatched path give the natural rate (short, likely continuations do repeat).
    """
    from collections import defaultdict

    from ingestion.landing import read_landing

    texts = defaultdict(set)
    for row in read_landing("t2t_completions", ["setting", "descriptor", "letter", "raw_output"]).to_pylist():
        texts[(row["setting"], row["descriptor"], row["letter"])].add(row["raw_output"])
    return sum(len(v) == 1 for v in texts.values()) if runs > 1 else 0, len(texts)


class DoraRun(Meter):
    """One dora configuration: an ``OpenAIChatBackend`` whose requests and ``generate`` time are counted."""

    def __init__(self, label: str, server, concurrency: int | None, attrs: dict):
        from models_inference.backends.text import load_text_backend

        super().__init__(label)
        kwargs = {} if concurrency is None else {"concurrency": concurrency}
        self.server = server
        self.backend = load_text_backend(server.model, backend="openai", base_url=server.base_url, **kwargs)
        for name, value in attrs.items():
            setattr(self.backend, name, value)
        self.requests = 0
        self.generate_s = 0.0
        each, generate = self.backend.each, self.backend.generate

        def counted_each(items, call, on_done=None, **kw):
            self.requests += len(items)  # one HTTP request per item (retries aside: none expected)
            return each(items, call, on_done, **kw)

        def timed_generate(*a, **kw):
            start = time.perf_counter()
            try:
                return generate(*a, **kw)
            finally:
                self.generate_s += time.perf_counter() - start

        # instance attributes shadow the methods: the probe and the backend call these
        self.backend.each, self.backend.generate = counted_each, timed_generate
        self.generate_rates: list[float] = []
        self.identical: list[tuple[int, int]] = []

    def clear(self) -> None:
        super().clear()
        self.generate_rates.clear(), self.identical.clear()

    def settings(self) -> str:
        b = self.backend
        return (
            f"concurrency {b.concurrency}, batch_completions {b.batch_completions}, max_n {b.max_n}, "
            f"prompts_per_request {b.prompts_per_request}, use_n {b.use_n}"
        )

    def run(self, templates, letters: str, runs: int) -> None:
        from models_inference.probes.biasdora.t2t import T2TProbeConfig, probe_t2t

        cfg = T2TProbeConfig(runs=runs, letters=letters, prompt_style="completion")
        n = len(templates) * len(letters) * runs
        out = []
        with fresh_home():
            self.requests, self.generate_s = 0, 0.0
            self.timed(self.server.proc.pid, n, lambda: out.append(probe_t2t(templates, self.backend, cfg, progress=False)))
            done = out[0]
            if done.generated != n or done.statuses.get("error"):
                raise RuntimeError(f"{self.label}: {done.generated} rows, statuses {dict(done.statuses)}")
            self.identical.append(identical_runs(runs))
        self.generate_rates.append(done.generated / self.generate_s)
        self.last_requests, self.last_generated, self.statuses = self.requests, done.generated, dict(done.statuses)


def other_servers(own: int | None) -> list[int]:
    """Pids of llama-server processes other than ``own`` (another test run's server, say)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == own:
            continue
        try:
            argv0 = (proc / "cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if argv0.endswith(b"llama-server"):
            found.append(int(proc.name))
    return found


def wait_alone(own: int | None, limit_s: float) -> float:
    """Wait (up to ``limit_s``) until no other llama-server runs; returns the seconds waited.

    Two llama-servers whose threads cover every core each spin at their barriers while the
    other holds a core, and both slow down by orders of magnitude (seconds per token for a
    135M model): a round measured then says nothing about dora.
    """
    start = time.monotonic()
    while other_servers(own) and time.monotonic() - start < limit_s:
        time.sleep(2)
    return time.monotonic() - start


def parse_variant(text: str) -> dict:
    """``concurrency=8,prompts_per_request=1`` -> ``{"concurrency": 8, "prompts_per_request": 1}``."""
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        value = value.strip()
        out[name.strip()] = {"true": True, "false": False}.get(value.lower(), int(value) if value.lstrip("-").isdigit() else value)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=24, help="distinct T2T completion prompts (curated prefixes x up to 12 letters)")
    parser.add_argument("--runs", type=int, default=4, help="completions per prompt (the registry default is 4)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of every contender (medians quoted)")
    parser.add_argument("--concurrency", default="1,4,8,16,32", help="concurrencies of the plain asyncio client, comma-separated")
    parser.add_argument("--slots", type=int, default=8, help="llama-server parallel sequences (-np)")
    parser.add_argument(
        "--ctx", type=int, default=4096, help="llama-server context per slot (-c is this x slots; tests/helpers/llama_server.py's default)"
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="an extra dora run with backend attributes set, e.g. 'concurrency=8', or 'pack=striped' "
        "(this script's packer: no n, the runs of a prompt in different requests); repeatable",
    )
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=900.0,
        help="seconds to wait, before the server starts and before each round, for other llama-servers to exit",
    )
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded transformers backend")
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    args = parser.parse_args(argv)
    concurrencies = [int(x) for x in args.concurrency.split(",") if x.strip()]

    from models_inference.model_ref import smollm2_gguf_path
    from models_inference.probes.biasdora.prompts import render_t2t_prompt
    from tests.helpers.llama_server import LlamaServer, llama_server_binary

    load_start = os.getloadavg()
    binary, why = llama_server_binary()
    if binary is None:
        raise SystemExit(why)
    templates, letters = pick_templates(args.prompts)
    texts = [render_t2t_prompt(t.prefix, t.setting, c, "completion").as_text() for t in templates for c in letters]
    # the runs of one prompt back to back, as the probe plans them
    completions = [p for p in texts for _ in range(args.runs)]
    n = len(completions)
    loads: list[float] = []
    log = Path(tempfile.gettempdir()) / f"bench-llama-server-{os.getpid()}.log"
    waited = [wait_alone(None, args.wait_idle)]
    # the server runs in its own session: a SIGTERM to this process must still stop it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    server = LlamaServer(binary, smollm2_gguf_path(), slots=args.slots, ctx=args.ctx, log=log).start()
    shared_rounds = []
    try:
        t0 = time.perf_counter()
        default = DoraRun("dora (default settings)", server, None, {})
        caps = default.backend.capabilities()
        probe_s = time.perf_counter() - t0
        if caps is None:
            raise SystemExit(f"the capability probe could not reach {server.base_url}")
        contenders = [default, DoraRun("dora, batching off", server, None, {"batch_completions": False})]
        contenders += [DoraRun(f"dora, variant {v}", server, None, parse_variant(v)) for v in args.variant]
        # warm-up: the server's first requests allocate its buffers; the clients' first import openai/httpx paths
        plain_rate(server.base_url, server.model, completions[: 2 * args.slots], args.slots)
        for c in contenders:
            c.run(templates, letters[:2], 1)
            c.clear()
        plain = {k: Meter(f"plain, concurrency {k}") for k in concurrencies}
        for r in range(args.rounds):
            waited.append(wait_alone(server.proc.pid, args.wait_idle))
            steps = [("dora", c) for c in contenders] + [("plain", k) for k in concurrencies]
            for kind, what in steps if r % 2 == 0 else reversed(steps):
                if kind == "dora":
                    what.run(templates, letters, args.runs)
                else:
                    plain[what].timed(server.proc.pid, n, lambda: asyncio.run(_plain(server.base_url, server.model, completions, what)))  # noqa: B023 -- timed() calls it in this iteration
            loads.append(os.getloadavg()[0])
            if other_servers(server.proc.pid):
                shared_rounds.append(r + 1)
            ceiling_r = max(plain[k].rates[-1] for k in concurrencies)
            print(
                f"round {r + 1}: "
                + ", ".join(f"{c.label} {c.rates[-1]:.1f}" for c in contenders)
                + f"; plain best {ceiling_r:.1f}/s; load {loads[-1]:.2f}",
                flush=True,
            )
    finally:
        server.stop()

    med = {k: statistics.median(m.rates) for k, m in plain.items()}
    best_k = max(med, key=med.get)
    ceiling = med[best_k]
    round_ceilings = [max(plain[k].rates[r] for k in concurrencies) for r in range(args.rounds)]
    lines = [
        f"server: llama-server ({binary.parent.parent.name}), SmolLM2-135M-Instruct Q4_1 GGUF, {args.slots} slots (-np), {args.ctx} tokens of context per slot, 2 threads, 127.0.0.1",
        f"work: {len(texts)} distinct T2T completion prompts ({len(templates)} curated prefixes x letters {letters[0]}..{letters[-1]}) x {args.runs} runs = {n} completions, "
        f"max 6 new tokens, temperature 0.7, top_p 0.95; {args.rounds} alternating rounds, medians",
        f"capability probe (once per process, not timed below): {probe_s:.2f} s: {caps.summary()}, slots {caps.slots}",
        "**plain asyncio client** (`openai.AsyncOpenAI`, one request per completion, semaphore + gather): "
        + ", ".join(f"concurrency {k}: {med[k]:.1f}/s" for k in concurrencies)
        + f"; **ceiling {ceiling:.1f} completions/s** (concurrency {best_k}; per round best {', '.join(f'{x:.1f}' for x in round_ceilings)}); "
        f"at concurrency {best_k} {plain[best_k].cpu()}",
    ]
    for c in contenders:
        rate = statistics.median(c.rates)
        shares = [x / y for x, y in zip(c.rates, round_ceilings, strict=True)]
        same = max(x for x, _ in c.identical), c.identical[0][1]
        lines.append(
            f"**{c.label}** ({c.settings()}): **{rate:.1f} completions/s, share of the ceiling {rate / ceiling:.2f}** "
            f"(dora's rate over the same round's best plain rate: {', '.join(f'{x:.2f}' for x in shares)}, median {statistics.median(shares):.2f}); "
            f"{c.last_requests} HTTP requests for {c.last_generated} completions = {c.last_requests / c.last_generated:.3f} per completion; "
            f"inside `generate` {statistics.median(c.generate_rates):.1f}/s (the rest is the probe's planning, parsing and landing); {c.cpu()}; "
            f"prompts whose {args.runs} runs came back identical: {same[0]} of {same[1]}"
            + (" (**the runs are not independent samples**)" if same[0] > same[1] // 4 else "")
            + f"; per round {', '.join(f'{x:.1f}' for x in c.rates)}"
        )
    dora_rate = statistics.median(default.rates)
    summary = {"dora": dora_rate, "ceiling": ceiling, "share": dora_rate / ceiling}

    if not args.no_embedded:
        from models_inference.backends.text import load_text_backend
        from models_inference.probes.biasdora.t2t import T2TProbeConfig, probe_t2t

        t0 = time.perf_counter()
        local = load_text_backend("smollm2-135m")
        load_s = time.perf_counter() - t0
        cfg = T2TProbeConfig(runs=args.runs, letters=letters, prompt_style="completion")
        with fresh_home():  # warm-up: torch's first forward passes
            probe_t2t(templates, local, T2TProbeConfig(runs=1, letters=letters[:2], prompt_style="completion"), progress=False)
        emb = []
        for _ in range(args.rounds):
            with fresh_home():
                start = time.perf_counter()
                done = probe_t2t(templates, local, cfg, progress=False)
                emb.append(done.generated / (time.perf_counter() - start))
        summary["embedded"] = statistics.median(emb)
        lines.append(
            f'**embedded** (`load_text_backend("smollm2-135m")`, transformers fp32, shared-prefix path, through `probe_t2t`, '
            f"same prompts, after the server stopped): **{summary['embedded']:.1f} completions/s** (per run {', '.join(f'{x:.1f}' for x in emb)}; load {load_s:.1f} s, not timed)"
        )
    load_end = os.getloadavg()
    summary["load"] = statistics.median(loads) if loads else load_end[0]
    lines.append(
        f"machine load average (1 min) at start {load_start[0]:.2f}, after each round {', '.join(f'{x:.2f}' for x in loads)}, at end {load_end[0]:.2f}, "
        f"on {os.cpu_count()} cores; the client, dora and the server share these cores; waited {sum(waited):.0f} s for other llama-servers to exit"
        + (f"; **another llama-server was running at the end of round(s) {shared_rounds}: those rates are not comparable**" if shared_rounds else "")
    )
    print("\n".join(lines))
    print(
        f"SUMMARY dora {summary['dora']:.1f}/s, ceiling {summary['ceiling']:.1f}/s, share {summary['share']:.2f}"
        + (f", embedded {summary['embedded']:.1f}/s" if "embedded" in summary else "")
        + f", load {summary['load']:.2f}, {date.today()}"
    )
    if not args.no_write:
        from benchmarks.report import write_section

        cmd = (
            "python -m benchmarks.bench_server_throughput"
            + "".join(
                f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v != parser.get_default(k) and not isinstance(v, (bool, list))
            )
            + "".join(f" --variant {v}" for v in args.variant)
            + (" --no-embedded" if args.no_embedded else "")
        )
        write_section("T2T over a real llama-server", "\n".join(f"- {ln}" for ln in lines) + f"\n\nCommand: `{cmd}`")


if __name__ == "__main__":
    main()

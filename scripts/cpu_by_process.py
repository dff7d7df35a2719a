"""Where a command's CPU goes, by kind of process: run the command, sample its process tree
(psutil) every ``--interval`` seconds, and print each kind's user + system CPU seconds, the
number of processes, and how busy the machine's cores were over the command's wall time.

    python scripts/cpu_by_process.py -- bash scripts/test.sh
    python scripts/cpu_by_process.py --json cpu.json -- bash scripts/test.sh tests/test_recovery.py

A process is attributed to a kind by its command line (:data:`KINDS`, first match wins): the
pytest-xdist workers (tests run in process), the ``dora`` commands the end-to-end tests start,
the ``dbt`` processes dagster-dbt starts, Dagster's step, webserver and daemon processes,
Celery workers, the test servers, the browser. A process seen once keeps being sampled after
its parent dies (a SIGKILLed ``dora`` leaves orphans); one that lives shorter than the
interval is missed. A process that replaces itself (``exec``: ``bash scripts/test.sh`` becomes
pytest) is classified again while its kind is ``other``.

Exit status: the command's own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import psutil

#: (kind, substrings of the command line; any one matches), first match wins.
KINDS = (
    ("pytest workers (tests in process)", ("exec(eval(sys.stdin",)),
    ("dora commands", ("orchestration.cli", "/bin/dora ")),
    ("dbt processes", ("/bin/dbt ",)),
    ("Celery workers", ("celery",)),
    ("Dagster processes (steps, UI, daemon, code server)", ("dagster", "multiprocessing.forkserver", "-B -c")),
    ("servers (moto, PostgreSQL, Redis)", ("moto", "postgres", "redis")),
    ("browser (Chromium, Playwright)", ("chrom", "playwright", "cli.js")),
    ("pytest main process", ("pytest",)),
)


def kind_of(cmdline: str) -> str:
    """The :data:`KINDS` entry whose substring occurs in ``cmdline``, else ``other``."""
    for kind, needles in KINDS:
        if any(n in cmdline for n in needles):
            return kind
    return "other"


def _cpu(proc: psutil.Process) -> float | None:
    try:
        t = proc.cpu_times()
        return t.user + t.system
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def run(command: list[str], interval: float) -> tuple[int, float, dict]:
    """Run ``command`` and sample its process tree until it exits.

    Returns:
        (exit status, wall seconds, {(pid, create_time): [kind, cmdline, cpu seconds]}).
    """
    start = time.monotonic()
    child = subprocess.Popen(command)
    root = psutil.Process(child.pid)
    seen: dict[tuple[int, float], list] = {}
    handles: dict[tuple[int, float], psutil.Process] = {}
    while True:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        for proc in tree:
            try:
                key = (proc.pid, proc.create_time())
            except psutil.NoSuchProcess:
                continue
            if key not in handles or seen[key][0] == "other":
                try:
                    cmd = " ".join(proc.cmdline())[:300]
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
                handles[key] = proc
                seen[key] = [kind_of(cmd + " "), cmd, seen.get(key, [0, 0, 0.0])[2]]
        for key, proc in list(handles.items()):
            cpu = _cpu(proc)
            if cpu is None:
                del handles[key]  # exited: its last sample stands
            else:
                seen[key][2] = cpu
        if child.poll() is not None:
            break
        time.sleep(interval)
    return child.returncode, time.monotonic() - start, seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example: python scripts/cpu_by_process.py -- bash scripts/test.sh",
    )
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between samples (default 0.2)")
    parser.add_argument("--json", metavar="FILE", help="also write every process seen (kind, command line, CPU s) to FILE")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    status, wall, seen = run(command, args.interval)
    totals: dict[str, list] = {}
    for kind, _cmd, cpu in seen.values():
        entry = totals.setdefault(kind, [0.0, 0])
        entry[0] += cpu
        entry[1] += 1
    total = sum(c for c, _n in totals.values())
    cores = os.cpu_count() or 1
    print(f"\nCPU by kind of process (user + system), {' '.join(command)}:")
    for kind, (cpu, n) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        print(f"  {cpu:8.1f} s  {cpu / max(total, 1e-9):6.1%}  {n:5d} processes  {kind}")
    print(f"  {total:8.1f} s  in all, over {wall:.0f} s of wall time: {total / (wall * cores):.0%} of {cores} cores busy")
    print(f"  (processes that lived less than {args.interval} s are not counted)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump([{"pid": pid, "kind": k, "cmdline": c, "cpu_s": round(cpu, 2)} for (pid, _t), (k, c, cpu) in seen.items()], out, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())

"""torch's threads on a shared machine: OpenMP threads that sleep when they wait, and a thread
count chosen from the cores this process can actually use.

torch runs each operation on a team of OpenMP threads that meet at a barrier when it ends. By
default (libgomp, which torch's CPU wheels use) a thread that arrives first spins there, up to
~300,000 iterations, before it sleeps. On a quiet machine that is fastest. On a shared one it is
a disaster: when another process holds one of the cores, the team's thread on it is
descheduled and its partner burns its own time slice spinning for it, at each of the thousands
of small operations a decoding step of a small model makes (measured on 2 cores: the default
audit's T2T at ~1/47 of its quiet rate beside other CPU-bound work, where a fair share is 1/2).

Two remedies, both measured by ``benchmarks/bench_shared_machine.py`` (BENCHMARKS.md):

* :func:`prefer_short_spin_openmp` sets ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` (a waiting
  thread spins that many times, a few microseconds, then sleeps and leaves the core to whoever
  can use it) before torch loads, unless ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is set
  already: ``dora``'s entry point calls it first thing, and the local backends before they
  import torch. OpenMP reads the variables once, when torch loads, so a process that imported
  torch earlier keeps the long spin. ``OMP_WAIT_POLICY=PASSIVE`` (sleep at once) shares as well
  but costs ~18% of the quiet rate (every barrier a wake-up); the short spin costs about half that
  and shares as well (measured side by side on an idle machine).
* :func:`adjust_threads`, called by the local backends at load and between decoding steps: with
  ``OMP_WAIT_POLICY=PASSIVE``, one thread per usable core (``os.sched_getaffinity``, capped by a
  cgroup CPU quota); otherwise (spinning threads, short or long), every :data:`INTERVAL` seconds
  the cores the other processes left free since the last look (at least 1: one thread has no
  partner to spin for); a look older than :data:`STALE` seconds (the process was idle) only
  starts a new one. ``DORA_TORCH_THREADS=N`` (or OpenMP's ``OMP_NUM_THREADS=N``) fixes the count
  instead (N >= 1).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: Environment variable that fixes the thread count (a positive integer) instead of choosing it.
THREADS_ENV = "DORA_TORCH_THREADS"
#: OpenMP's wait policy variable, read once when torch (its libgomp) loads.
WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
#: Seconds between two looks at the machine (a look reads /proc/stat: ~0.1 ms).
INTERVAL = 0.5
#: A look older than this measured a time this process was idle (between two calls, or while
#: other work ran): it starts a new look and leaves the thread count as it is.
STALE = 4 * INTERVAL
#: libgomp's spin count before a waiting thread sleeps, as dora sets it (libgomp's own default is
#: 300,000 when no wait policy is set): 20,000 kept ~91% of the quiet rate and a fair share beside
#: a busy neighbour in benchmarks/bench_shared_machine.py, where PASSIVE (0) kept ~82%.
SPIN_COUNT = 20_000
#: libgomp's variable for it.
SPIN_ENV = "GOMP_SPINCOUNT"
#: Share of a core the other processes may use on it before it no longer counts as free:
#: rounding ``cores - busy`` to the nearest integer, a neighbour using more than half a core takes it.
_ROUND = 0.5


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity set, capped by a cgroup v2 CPU quota
    (``/sys/fs/cgroup/cpu.max``, a container's ``--cpus``) when one is set; at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text(encoding="ascii").split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(-(-int(quota) // int(period)))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


_fixed: int | None = None


def fix_threads(count: int | None) -> None:
    """Fix torch's intra-op threads at ``count`` for this process (``None``: adapt again); it
    takes precedence over ``DORA_TORCH_THREADS``."""
    global _fixed
    _fixed = count


def fixed_threads() -> int | None:
    """The count :func:`fix_threads`, else ``DORA_TORCH_THREADS``, else ``OMP_NUM_THREADS`` (a
    positive integer; OpenMP's own variable, which torch reads at import) fixes; else ``None``.

    Raises:
        ValueError: ``DORA_TORCH_THREADS`` is set but not a positive integer (one line naming it).
    """
    if _fixed is not None:
        return _fixed
    text = os.environ.get(THREADS_ENV, "").strip()
    if text and (not text.isdigit() or int(text) < 1):
        raise ValueError(f"{THREADS_ENV}={text!r}: expected a positive integer (torch threads)")
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not text and omp.isdigit() and int(omp) >= 1:
        text = omp
    return int(text) if text else None


class CoreShare:
    """How many cores the other processes leave this one, measured between two looks.

    Args:
        cores: usable cores (default :func:`usable_cores`).
        clock, busy, own: injectable readings (wall seconds, CPU seconds used on this process's
            cores by every process, CPU seconds used by this process), for tests.
    """

    def __init__(self, cores: int | None = None, *, clock=time.monotonic, busy=None, own=None):
        self.cores = cores or usable_cores()
        self._clock, self._busy, self._own = clock, busy or _busy_seconds, own or _own_seconds
        self._last = (self._clock(), self._busy(), self._own())

    def free_cores(self) -> float | None:
        """Cores the other processes left unused since the last look (0..``cores``), then a new
        look starts; ``None`` when less than :data:`INTERVAL` seconds passed (no new look) or
        more than :data:`STALE` (a new look starts, this one is not used)."""
        now = self._clock()
        wall = now - self._last[0]
        if wall < INTERVAL:  # the clock alone between looks: this runs at every decoding step
            return None
        busy, own = self._busy(), self._own()
        others = max(0.0, (busy - self._last[1]) - (own - self._last[2])) / wall
        self._last = (now, busy, own)
        if wall > STALE:  # the look spans a time this process was idle: it says nothing of now
            return None
        return min(float(self.cores), max(0.0, self.cores - others))

    def threads(self, free: float) -> int:
        """The thread count for ``free`` cores: the nearest whole core count, 1..``cores``."""
        return max(1, min(self.cores, int(free + _ROUND)))


def _busy_seconds() -> float:
    """CPU seconds spent on this process's cores by every process (not idle, not waiting for I/O)."""
    import psutil

    per_cpu = psutil.cpu_times(percpu=True)
    mine = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(len(per_cpu))
    total = 0.0
    for i in mine:
        if i < len(per_cpu):
            t = per_cpu[i]
            total += sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return total


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system


_share: CoreShare | None = None


def prefer_short_spin_openmp() -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` unless it or ``OMP_WAIT_POLICY`` is set, or
    torch is already imported (then too late: OpenMP has read them); returns whether this
    process's OpenMP threads will soon sleep when they wait (a short spin or PASSIVE)."""
    import sys

    if SPIN_ENV not in os.environ and WAIT_POLICY_ENV not in os.environ and "torch" not in sys.modules:
        os.environ[SPIN_ENV] = str(SPIN_COUNT)
    return _passive() or os.environ.get(SPIN_ENV, "").strip() == str(SPIN_COUNT)


def _passive() -> bool:
    return os.environ.get(WAIT_POLICY_ENV, "").strip().upper() == "PASSIVE"


def adjust_threads() -> int:
    """Set torch's intra-op threads (see the module docstring); returns the count in force.
    Cheap between looks (one clock read): call it at load and between model steps.

    Raises:
        ValueError: ``DORA_TORCH_THREADS`` is set but not a positive integer.
    """
    global _share
    import torch

    wanted = fixed_threads()
    if wanted is None and _passive():
        wanted = usable_cores()
    if wanted is None:  # spinning threads (a short or a long spin): only as many as the cores left free
        if _share is None:
            _share = CoreShare()
        free = _share.free_cores()
        wanted = _share.threads(free) if free is not None else None
    if wanted is not None and wanted != torch.get_num_threads():
        torch.set_num_threads(wanted)
    return torch.get_num_threads()


__all__ = [
    "INTERVAL",
    "SPIN_COUNT",
    "SPIN_ENV",
    "STALE",
    "THREADS_ENV",
    "WAIT_POLICY_ENV",
    "CoreShare",
    "adjust_threads",
    "fix_threads",
    "fixed_threads",
    "prefer_short_spin_openmp",
    "usable_cores",
]

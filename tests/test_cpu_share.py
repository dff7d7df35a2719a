"""torch's threads follow the cores other processes leave free (models_inference/backends/cpu_share.py).

The readings (wall clock, CPU time of every process on this process's cores, this process's
own) are injected, so each case states a machine exactly; the speed this buys is measured by
``benchmarks/bench_shared_machine.py`` (BENCHMARKS.md), not asserted here.
"""

from __future__ import annotations

import os

import pytest

from models_inference.backends import cpu_share
from models_inference.backends.cpu_share import INTERVAL, STALE, CoreShare


class Machine:
    """A 2-core machine whose readings the test advances: ``run(seconds, own=, others=)``."""

    def __init__(self):
        self.now, self.busy, self.own = 100.0, 50.0, 10.0

    def run(self, seconds: float, *, own: float, others: float) -> None:
        """``seconds`` pass with this process using ``own`` cores and the others ``others``."""
        self.now += seconds
        self.own += own * seconds
        self.busy += (own + others) * seconds

    def share(self) -> CoreShare:
        return CoreShare(2, clock=lambda: self.now, busy=lambda: self.busy, own=lambda: self.own)


@pytest.mark.parametrize(
    "own,others,free,threads",
    [
        (2.0, 0.0, 2.0, 2),  # quiet: both cores
        (1.9, 0.1, 1.9, 2),  # a daemon waking now and then does not take a core
        (1.0, 1.0, 1.0, 1),  # beside a process using both cores, at two threads each: one
        (0.67, 1.33, 0.67, 1),  # the same neighbour, at one thread: still one (never 0)
        (1.0, 0.6, 1.4, 1),  # more than half a core taken: that core is not free
        (0.0, 2.0, 0.0, 1),
    ],
)
def test_threads_follow_the_cores_the_others_leave(own, others, free, threads):
    machine = Machine()
    share = machine.share()
    machine.run(1.0, own=own, others=others)
    got = share.free_cores()
    assert got == pytest.approx(free) and share.threads(got) == threads


def test_no_new_look_within_the_interval_and_each_look_covers_only_its_own_interval():
    machine = Machine()
    share = machine.share()
    machine.run(INTERVAL / 2, own=1, others=1)
    assert share.free_cores() is None  # too early: the look keeps accumulating
    machine.run(INTERVAL / 2, own=1, others=1)
    assert share.free_cores() == pytest.approx(1.0)
    machine.run(INTERVAL, own=2, others=0)  # the neighbour left
    assert share.free_cores() == pytest.approx(2.0)


def test_a_look_spanning_an_idle_time_only_starts_a_new_one():
    """A process that comes back after other work ran (the quiet phase after a busy one) would
    see the past's neighbours: that look is dropped, and the next one measures now."""
    machine = Machine()
    share = machine.share()
    machine.run(STALE + 1, own=0, others=2)  # idle while another process used both cores
    assert share.free_cores() is None
    machine.run(INTERVAL, own=2, others=0)
    assert share.free_cores() == pytest.approx(2.0)


def test_a_fixed_count_wins(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv(cpu_share.THREADS_ENV, raising=False)
    assert cpu_share.fixed_threads() is None
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # scripts/test.sh sets it under two workers
    assert cpu_share.fixed_threads() == 1
    monkeypatch.setenv(cpu_share.THREADS_ENV, "3")
    assert cpu_share.fixed_threads() == 3
    cpu_share.fix_threads(2)
    try:
        assert cpu_share.fixed_threads() == 2
    finally:
        cpu_share.fix_threads(None)
    monkeypatch.setenv(cpu_share.THREADS_ENV, "two")
    with pytest.raises(ValueError, match="DORA_TORCH_THREADS='two': expected a positive integer"):
        cpu_share.fixed_threads()


def test_adjust_threads_sets_torch(monkeypatch):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv(cpu_share.THREADS_ENV, "1")
    monkeypatch.setattr(cpu_share, "usable_cores", lambda: 2)
    try:
        assert cpu_share.adjust_threads() == 1 and torch.get_num_threads() == 1
        monkeypatch.delenv(cpu_share.THREADS_ENV)
        # threads that sleep when they wait: one per usable core, however busy the machine
        monkeypatch.setenv(cpu_share.WAIT_POLICY_ENV, "passive")
        assert cpu_share.adjust_threads() == 2 == torch.get_num_threads()
        # threads that spin (torch loaded with another policy): only on the cores left free
        monkeypatch.setenv(cpu_share.WAIT_POLICY_ENV, "ACTIVE")
        machine = Machine()
        monkeypatch.setattr(cpu_share, "_share", machine.share())
        machine.run(1.0, own=1, others=1)
        assert cpu_share.adjust_threads() == 1 == torch.get_num_threads()
        machine.run(1.0, own=1, others=0)  # the neighbour left
        assert cpu_share.adjust_threads() == 2 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_a_short_spin_is_preferred_only_before_torch_loads_and_never_over_a_users_choice(monkeypatch):
    import sys

    for name in (cpu_share.WAIT_POLICY_ENV, cpu_share.SPIN_ENV):  # recorded as they were, so the test leaves them so
        monkeypatch.setenv(name, "x")
        monkeypatch.delenv(name)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert cpu_share.prefer_short_spin_openmp() is True
    assert os.environ[cpu_share.SPIN_ENV] == "20000" and cpu_share.WAIT_POLICY_ENV not in os.environ
    monkeypatch.setenv(cpu_share.SPIN_ENV, "300000")  # the user's choice stands
    assert cpu_share.prefer_short_spin_openmp() is False and os.environ[cpu_share.SPIN_ENV] == "300000"
    monkeypatch.delenv(cpu_share.SPIN_ENV)
    monkeypatch.setenv(cpu_share.WAIT_POLICY_ENV, "ACTIVE")  # a wait policy set: no spin count beside it
    assert cpu_share.prefer_short_spin_openmp() is False and cpu_share.SPIN_ENV not in os.environ
    monkeypatch.setenv(cpu_share.WAIT_POLICY_ENV, "PASSIVE")
    assert cpu_share.prefer_short_spin_openmp() is True and cpu_share.SPIN_ENV not in os.environ
    monkeypatch.delenv(cpu_share.WAIT_POLICY_ENV)
    monkeypatch.setitem(sys.modules, "torch", object())  # loaded already: OpenMP has read the variables
    assert cpu_share.prefer_short_spin_openmp() is False and cpu_share.SPIN_ENV not in os.environ


def test_usable_cores_are_this_process_s():
    assert 1 <= cpu_share.usable_cores() <= len(os.sched_getaffinity(0))

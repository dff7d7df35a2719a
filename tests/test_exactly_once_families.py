"""Exactly once, every family, and different families at once on one home, in one scenario:
three ``dora audit --family <family>`` processes (counterfactual, ModSCAN, VLStereoSet) started
together on one fresh ``DORA_HOME``, each SIGKILLed in the middle of its probe (after its first
landing shard, before its last); then two audits of different families started together on that
home (``--family counterfactual --family modscan``, and the killed VLStereoSet command again) both
finish with their own rows, and every family's keys have landed exactly once.

One scenario guards both promises because each costs whole ``dora`` processes (Dagster start-up,
dbt builds): run apart they took seven processes and five dbt builds, here five processes and two
builds. The reruns are the concurrent audits, so they also start on a home that holds the dead
runs of three killed processes (whose pool slots must be freed) and no warehouse yet (the first
build happens with two processes wanting the writer).

Real ``dora`` processes (Dagster, dbt, DuckDB); the models are local OpenAI-compatible stub
servers (``tests/helpers/openai_server.py``), one per family, each answering quickly until about
one shard of its family's calls is answered and slowly (0.5 s) after, so each kill lands while
that family's calls are still in flight whatever the other families do. BiasDora's own case:
``tests/test_fault_tolerance.py``; identical audits at once: ``tests/test_concurrency.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import duckdb
import pytest

from tests.helpers.dora_cli import dora_argv, dora_env, prepare_dbt_manifest
from tests.helpers.openai_server import OpenAIStubServer, tiny_png

KEYS = {
    "counterfactual_responses": "audit_id, response_id",
    "modscan_responses": "audit_id, probe, attribute, scenario, instance, condition, prefix, query_unit",
    "vlstereoset_scores": "audit_id, scorer_variant, item_id, condition, caption_kind",
}


def _shards(home, table: str) -> list[str]:
    return [str(p) for p in (home / "landing" / table).rglob("*.parquet") if p.name != "_schema.parquet"]


def _landed(home, table: str) -> tuple[int, int]:
    """(rows, distinct keys) of a landing table, read from its shards."""
    files = _shards(home, table)
    if not files:
        return 0, 0
    with duckdb.connect() as con:
        return con.execute(f"select count(*), count(distinct ({KEYS[table]})) from read_parquet(?, union_by_name=true)", [files]).fetchone()


def _audit_ids(home, table: str) -> int:
    with duckdb.connect() as con:
        return con.execute("select count(distinct audit_id) from read_parquet(?, union_by_name=true)", [_shards(home, table)]).fetchone()[0]


def _kill_each_after_its_first_shard(runs: dict, env, home, logs) -> None:
    """Start every ``family: (argv, table)`` of ``runs`` at once; SIGKILL each as soon as a shard
    of its own table lands (a family that ends before that fails the test, with its log)."""
    procs, files = {}, {}
    try:
        for family, (argv, _) in runs.items():
            files[family] = open(logs / f"{family}.log", "w")
            procs[family] = subprocess.Popen(argv, env=env, stdout=files[family], stderr=subprocess.STDOUT)
        alive = set(procs)
        deadline = time.monotonic() + 600  # generous: three Dagster start-ups on a loaded 2-core machine are slow
        while alive and time.monotonic() < deadline:
            for family in sorted(alive):
                proc = procs[family]
                if proc.poll() is not None:
                    raise AssertionError(
                        f"dora audit --family {family} ended before it could be killed:\n{(logs / f'{family}.log').read_text()[-3000:]}"
                    )
                if _shards(home, runs[family][1]):
                    os.kill(proc.pid, signal.SIGKILL)
                    alive.discard(family)
            time.sleep(0.05)
        assert not alive, f"no shard landed within 600 s for {sorted(alive)}"
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for fh in files.values():
            fh.close()
    for family, proc in procs.items():
        assert proc.returncode == -signal.SIGKILL, (family, proc.returncode)


def _images(folder, n: int = 30):
    folder.mkdir()
    for row in range(1, n + 1):  # <data row>.png for every row of the synthetic file
        (folder / f"{row}.png").write_bytes(tiny_png((8 * row % 255, 90, 160), size=(8, 8)))
    return folder


CASES = {
    # 12 members x 8 seeds = 96 responses, in shards of 64
    "counterfactual": (
        ["--backend", "openai", "--model", "stub", "--cf-prompts", "Describe", "--cf-seeds", "8", "--cf-judge-backend", "none"],
        "counterfactual_responses",
        96,
    ),
    # 20 persona queries x 14 samples = 280, in shards of 256
    "modscan": (
        ["--modscan-backend", "openai", "--modscan-model", "stub", "--modscan-probes", "modscan_text_persona", "--modscan-samples", "14"],
        "modscan_responses",
        280,
    ),
    # IDM (the paper's reference scorer, no model) and the mcq scorer over the synthetic items
    # (with images) through an OpenAI vision endpoint, shards of 32 units
    "vlstereoset": (
        ["--vlstereoset-scorers", "idm", "--vlstereoset-vlm-backend", "openai", "--vlstereoset-vlm-model", "stub", "--images", "{images}"],
        "vlstereoset_scores",
        None,
    ),
}

#: Audits one family's command makes: one per family, one per scorer for VLStereoSet (IDM, mcq).
AUDITS = {"counterfactual": 1, "modscan": 1, "vlstereoset": 2}

URL_FLAG = {"counterfactual": "--base-url", "modscan": "--modscan-base-url", "vlstereoset": "--vlstereoset-vlm-base-url"}

#: Calls answered quickly (about one shard's worth); the later ones take 0.5 s each.
FIRST_SHARD = {"counterfactual": 64, "modscan": 256, "vlstereoset": 32}


def _argv(servers: dict, tmp_path, *families: str) -> list[str]:
    """One ``dora audit`` of ``families`` (``--family`` repeated), each against its own stub server."""
    args = []
    for family in families:
        flags = [f.format(images=tmp_path / "images") for f in CASES[family][0]]
        args += ["--family", family, *flags, URL_FLAG[family], servers[family].base_url]
    return dora_argv("audit", *args, "--no-progress")


def _stub_server(family: str, slow: dict) -> OpenAIStubServer:
    server = OpenAIStubServer()

    def reply(req):  # quick until this family's first shard is answered, then slow: its kill lands mid-probe
        if len(server.requests) > slow[family]:
            time.sleep(0.5)
        return "A"

    server.chat_reply = reply
    return server


def _stop_all(procs: dict) -> None:
    """Kill and reap every process of ``procs`` still running."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
@pytest.mark.scenario
def test_families_sigkilled_mid_probe_at_once_then_rerun_as_two_concurrent_audits_land_every_key_exactly_once(tmp_path):
    prepare_dbt_manifest()
    home = tmp_path / "home"
    _images(tmp_path / "images")
    env = dora_env(home, OPENAI_API_KEY="sk-test")
    slow = dict(FIRST_SHARD)
    procs, outs = {}, {}
    with contextlib.ExitStack() as stack:
        servers = {family: stack.enter_context(_stub_server(family, slow)) for family in CASES}
        stack.callback(_stop_all, procs)  # before the servers stop: a rerun still running is killed first
        # three families at once on a fresh home (they create the Dagster storage together), each
        # killed after its own first shard
        _kill_each_after_its_first_shard({f: (_argv(servers, tmp_path, f), CASES[f][1]) for f in CASES}, env, home, tmp_path)
        partial = {f: _landed(home, table) for f, (_, table, _) in CASES.items()}
        for family in CASES:
            slow[family] = float("inf")
        # two audits of different families at once on that home: one of two families (one dbt
        # build for both), and the killed VLStereoSet command again (mcq calls a model, IDM none)
        reruns = {
            "counterfactual+modscan": _argv(servers, tmp_path, "counterfactual", "modscan"),
            "vlstereoset": _argv(servers, tmp_path, "vlstereoset"),
        }
        for name, argv in reruns.items():
            procs[name] = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, proc in procs.items():
            outs[name] = proc.communicate(timeout=900)
    for name, proc in procs.items():
        assert proc.returncode == 0, (name, outs[name][1][-3000:])  # both concurrent audits finish

    for family, (_, table, expected) in CASES.items():
        rows, keys = _landed(home, table)
        got, got_keys = partial[family]
        assert got == got_keys and 0 < got < rows, (family, got, got_keys, rows)  # the kill landed mid-probe
        assert rows == keys, (family, rows, keys)  # every key exactly once: nothing generated twice
        if expected is not None:
            assert rows == expected, (family, rows)  # nothing lost
        # the rerun went on with the killed audit rather than starting another (counterfactual's and
        # ModSCAN's rerun is another command: both families at once): a fresh audit lands its keys
        # again under a new audit id, which rows == keys does not see and VLStereoSet has no total for
        assert _audit_ids(home, table) == AUDITS[family], (family, _audit_ids(home, table))
    with duckdb.connect() as con:  # every synthetic item scored by mcq: each (item, condition, caption) once
        items = con.execute(
            "select count(distinct item_id) from read_parquet(?, union_by_name=true) where scorer = 'mcq'", [_shards(home, "vlstereoset_scores")]
        ).fetchone()[0]
    assert items >= 20, items

    # each concurrent audit's own rows reached its marts (the two builds queued for the one writer)
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("select count(*) from fct_counterfactual_responses").fetchone()[0] == 96
        assert con.execute("select count(*) from fct_modscan_responses").fetchone()[0] == 280  # 20 persona queries x 14 samples
        assert con.execute("select count(distinct item_id) from fct_vlstereoset_scores where scorer = 'idm'").fetchone()[0] >= 20

"""Exactly once, every family: ``dora audit --probe <family>`` SIGKILLed in the middle of its
probe (after its first landing shard, before its last), then run again, lands every key exactly
once; two audits of different families started together on one ``DORA_HOME`` both finish
with their own rows.

Real ``dora`` processes (Dagster, dbt, DuckDB) on a scratch home; the models are the local
OpenAI-compatible stub server (``tests/helpers/openai_server.py``) with a per-request latency,
so the kill lands while calls are still in flight. BiasDora's own case:
``tests/test_fault_tolerance.py``; identical audits at once: ``tests/test_concurrency.py``.
"""

from __future__ import annotations

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


def _landed(home, table: str) -> tuple[int, int]:
    """(rows, distinct keys) of a landing table, read from its shards."""
    files = [str(p) for p in (home / "landing" / table).rglob("*.parquet") if p.name != "_schema.parquet"]
    if not files:
        return 0, 0
    with duckdb.connect() as con:
        return con.execute(f"select count(*), count(distinct ({KEYS[table]})) from read_parquet(?, union_by_name=true)",
                           [files]).fetchone()


def _kill_after_first_shard(argv, env, home, table, log_path) -> None:
    shards = home / "landing" / table
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600  # generous: a loaded 2-core machine is slow to start Dagster
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                if any(p.name != "_schema.parquet" for p in shards.rglob("*.parquet")):
                    break
                time.sleep(0.05)
            assert proc.poll() is None, f"dora audit ended before it could be killed:\n{log_path.read_text()[-3000:]}"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


def _images(folder, n: int = 30):
    folder.mkdir()
    for row in range(1, n + 1):  # <data row>.png for every row of the synthetic file
        (folder / f"{row}.png").write_bytes(tiny_png((8 * row % 255, 90, 160), size=(8, 8)))
    return folder


CASES = {
    # 12 members x 8 seeds = 96 responses, in shards of 64
    "counterfactual": (["--backend", "openai", "--model", "stub", "--cf-prompts", "Describe", "--cf-seeds", "8",
                        "--cf-judge-backend", "none"], "counterfactual_responses", 96),
    # 20 persona queries x 14 samples = 280, in shards of 256
    "modscan": (["--modscan-backend", "openai", "--modscan-model", "stub", "--modscan-probes", "modscan_text_persona",
                 "--modscan-samples", "14"], "modscan_responses", 280),
    # the mcq scorer over the synthetic items (with images), through an OpenAI vision endpoint, shards of 32 units
    "vlstereoset": (["--vlstereoset-scorers", "idm", "--vlstereoset-vlm-backend", "openai", "--vlstereoset-vlm-model", "stub",
                     "--images", "{images}"], "vlstereoset_scores", None),
}


#: Calls answered quickly (about one shard's worth); the later ones take 0.5 s each.
FIRST_SHARD = {"counterfactual": 64, "modscan": 256, "vlstereoset": 32}


def _argv(family: str, base_url: str, tmp_path) -> list[str]:
    flags, _, _ = CASES[family]
    url_flag = {"counterfactual": "--base-url", "modscan": "--modscan-base-url", "vlstereoset": "--vlstereoset-vlm-base-url"}[family]
    flags = [f.format(images=tmp_path / "images") for f in flags]
    return dora_argv("audit", "--probe", family, *flags, url_flag, base_url, "--no-progress")


@pytest.mark.slow
@pytest.mark.parametrize("family", list(CASES))
def test_sigkill_mid_probe_then_rerun_lands_every_key_exactly_once(tmp_path, family):
    prepare_dbt_manifest()
    home = tmp_path / "home"
    _images(tmp_path / "images")
    _, table, expected = CASES[family]
    env = dora_env(home, OPENAI_API_KEY="sk-test")
    slow = {"after": FIRST_SHARD[family]}
    with OpenAIStubServer() as server:
        def reply(req):  # quick until the first shard's calls are answered, then slow: the kill lands mid-probe
            if len(server.requests) > slow["after"]:
                time.sleep(0.5)
            return "A"

        server.chat_reply = reply
        argv = _argv(family, server.base_url, tmp_path)
        _kill_after_first_shard(argv, env, home, table, tmp_path / "first.log")
        partial, partial_keys = _landed(home, table)
        slow["after"] = float("inf")
        rerun = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rows, keys = _landed(home, table)
    assert partial == partial_keys and 0 < partial < rows, (partial, rows)  # the kill landed mid-probe
    assert rows == keys, (rows, keys)  # every key exactly once: nothing generated twice
    if expected is not None:
        assert rows == expected  # nothing lost
    else:  # every synthetic item scored by mcq: each (item, condition, caption) once
        with duckdb.connect() as con:
            files = [str(p) for p in (home / "landing" / table).rglob("*.parquet") if p.name != "_schema.parquet"]
            items = con.execute("select count(distinct item_id) from read_parquet(?, union_by_name=true) where scorer = 'mcq'",
                                [files]).fetchone()[0]
        assert items >= 20, items


@pytest.mark.slow
def test_two_families_audited_at_once_on_one_home_both_finish_with_their_own_rows(tmp_path):
    prepare_dbt_manifest()
    home = tmp_path / "home"
    env = dora_env(home, OPENAI_API_KEY="sk-test")
    with OpenAIStubServer() as server:
        server.latency = 0.02
        server.chat_reply = lambda req: "A"
        # VLStereoSet's reference scorer IDM calls no model: the two audits differ in what they land and build
        vls = dora_argv("audit", "--probe", "vlstereoset", "--vlstereoset-scorers", "idm", "--no-progress")
        ms = dora_argv("audit", "--probe", "modscan", "--modscan-backend", "openai", "--modscan-model", "stub",
                       "--modscan-base-url", server.base_url, "--modscan-probes", "modscan_text_persona", "--no-progress")
        procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in (vls, ms)]
        outs = [p.communicate(timeout=900) for p in procs]
    for proc, (_, err) in zip(procs, outs):
        assert proc.returncode == 0, err[-3000:]
    scores, keys = _landed(home, "vlstereoset_scores")
    assert scores == keys > 0
    assert _landed(home, "modscan_responses") == (20, 20)  # 20 persona queries x 1 sample
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("select count(*) from fct_modscan_responses").fetchone()[0] == 20
        assert con.execute("select count(distinct item_id) from fct_vlstereoset_scores where scorer = 'idm'").fetchone()[0] >= 20

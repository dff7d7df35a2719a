"""The local OpenAI-compatible server dies in the middle of a real
``dora audit`` (subprocess, Dagster + dbt): the audit exits non-zero with one line naming the
cause ("BiasDora T2T: N of M calls failed (...): ... connection refused at http://..."); after a restart at the same
URL, re-running the same command completes every row exactly once, with no ``error`` row left
in ``stg_t2t_completions`` (the failed calls' rows stay in landing as history: ``attempts``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from tests.helpers.openai_server import OpenAIStubServer

REPO = Path(__file__).resolve().parents[1]
LETTERS = "abcdefghijklmnopqrst"  # 20 letters x 2 runs x 1 descriptor x 1 setting = 40 calls


def _env(home: Path) -> dict:
    env = dict(os.environ)
    env.update(
        DORA_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
        PYTHONPATH=str(REPO),
        OPENAI_API_KEY="sk-issue17-test",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return env


def _continue(req: dict) -> str:
    time.sleep(0.05)  # slow enough that the server can die in the middle
    return "rave, and"


@pytest.mark.slow
@pytest.mark.scenario
def test_server_killed_mid_audit_fails_loudly_then_rerun_completes(tmp_path):
    home = tmp_path / "home"
    with OpenAIStubServer() as server:
        port, base_url = server.port, server.base_url
    args = [
        # the BiasDora family only: the other families' default samples would call the same server
        sys.executable,
        "-m",
        "orchestration.cli",
        "audit",
        "--family",
        "biasdora",
        "--backend",
        "openai",
        "--base-url",
        base_url,
        "--model",
        "stub-model",
        "--prompt-style",
        "completion",
        "--descriptors",
        "child",
        "--settings",
        "singular",
        "--letters",
        LETTERS,
        "--runs",
        "2",
        "--judge-backend",
        "none",
        "--no-progress",
        "--api-concurrency",
        "1",
        "--api-max-retries",
        "1",
    ]
    server = OpenAIStubServer(port=port).__enter__()
    server.completion_reply = _continue

    def kill_after(n: int) -> None:  # the server dies once it has answered n calls
        while len(server.requests) < n:
            time.sleep(0.02)
        server.__exit__(None, None, None)

    killer = threading.Thread(target=kill_after, args=(8,), daemon=True)
    killer.start()
    first = subprocess.run(args, env=_env(home), capture_output=True, text=True, timeout=600)
    killer.join(timeout=5)
    assert first.returncode == 1, first.stderr[-3000:]
    lines = [line for line in first.stderr.splitlines() if line.startswith("dora audit:")]
    assert len(lines) == 1, first.stderr[-3000:]
    assert re.match(
        r"dora audit: error: BiasDora T2T: \d+ of \d+ calls failed \([^)]*\): APIConnectionError: .*\(connection refused\) at "
        rf"http://127\.0\.0\.1:{port}/v1/completions\. .*re-run the same command",
        lines[0],
    ), lines[0]
    assert "Traceback" not in first.stderr

    with OpenAIStubServer(port=port) as server:  # restarted at the same URL
        server.completion_reply = lambda req: "rave, and"
        second = subprocess.run(args, env=_env(home), capture_output=True, text=True, timeout=600)
        calls = len(server.requests)
    assert second.returncode == 0, second.stderr[-3000:]
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute("select letter, run, parse_status, word, attempts from stg_t2t_completions where descriptor = 'child'").fetchall()
    assert len(rows) == len({(r[0], r[1]) for r in rows}) == 40  # every key exactly once
    assert {r[2] for r in rows} == {"ok"} and all(r[3] == r[0] + "rave" for r in rows)
    retried = [r for r in rows if r[4] > 1]
    assert len(retried) == calls  # the keys that failed were called again, once each; no others
    assert 0 < calls < 40

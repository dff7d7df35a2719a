"""``dora audit --dry-run`` prints the audit id the real T2T run lands: the id covers the
descriptor selection (``audit_id_for(..., templates)``), so a dry run of a small selection names
the audit a real run of it landed, and counts its landed rows (local OpenAI stub server)."""

from __future__ import annotations

import re

import pytest

from ingestion.landing import read_landing
from tests.helpers.openai_server import OpenAIStubServer

FLAGS = [
    "--family",
    "biasdora",
    "--backend",
    "openai",
    "--model",
    "stub-model",
    "--prompt-style",
    "chat",
    "--descriptors",
    "child",
    "--settings",
    "noun",
    "--letters",
    "ab",
    "--runs",
    "2",
]


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dry-run")


def test_the_dry_run_names_the_audit_a_real_run_of_the_selection_landed(dora_home, api_key, capsys):
    from models_inference.probes.biasdora.t2t import probe_t2t
    from orchestration.cli import main
    from orchestration.cli.flags import op_run_configs
    from orchestration.cli.parser import build_parser
    from orchestration.defs.biasdora.t2t.assets import probe_parts

    with OpenAIStubServer() as server:
        server.chat_reply = lambda body: "[kind]"
        flags = [*FLAGS, "--base-url", server.base_url]
        assert main(["audit", "--dry-run", *flags]) == 0
        before = capsys.readouterr().out
        planned = re.search(r"audit id (\S+)", before).group(1)
        # the real run: the T2T asset's own parts (templates, deferred backend, probe config) of the same flags
        config = op_run_configs(build_parser().parse_args(["audit", *flags]))["t2t_completions"]
        templates, backend, probe = probe_parts(config)
        summary = probe_t2t(templates, backend, probe, progress=False)
        assert main(["audit", "--dry-run", *flags]) == 0
        after = capsys.readouterr().out
    landed = {r["audit_id"] for r in read_landing("t2t_completions").to_pylist()}
    assert landed == {summary.audit_id} == {planned}
    assert summary.generated == 1 * 2 * 2  # child (noun) x 2 letters x 2 runs
    # the second dry run finds those rows: the same audit
    row = lambda out: re.search(r"^t2t\s+noun\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)$", out, re.M).groups()  # noqa: E731
    assert row(before) == ("1", "4", "0", "4") and row(after) == ("1", "4", "4", "0")
    assert f"audit id {planned}" in after

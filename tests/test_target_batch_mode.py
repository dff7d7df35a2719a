"""Batch mode (``--api-batch``) for registry targets: a target's ``options`` turn it on (checked
as the common flags they stand for), ``dora audit --target T --api-batch`` passes it through,
the dry run of a target prices its batch steps on the partition's version, and the T2T step of
a target's partition sends its requests through the Batch API (local Files + Batches server,
tests/helpers/batch_server.py) with the partition's version and the target on its rows, audit
events and ledger."""

from __future__ import annotations

import re

import pytest

from ingestion.errors import TargetConfigError
from ingestion.landing import read_landing
from ingestion.registry import load_registry, parse_registry
from orchestration.defs.audits.runs import run_config_for_target, target_ops
from orchestration.families import FAMILIES
from tests.helpers.batch_server import BatchStubServer

REGISTRY = """
targets:
  - name: bd
    family: biasdora
    backend: openai
    model: stub-model
    base_url: {url}
    api_key_env: BD_STUB_KEY
    version: {{source: explicit, value: v3}}
    probe: {{settings: [noun], descriptors: [child], letters: ab, runs: 2, prompt_style: chat}}
    options: {{biasdora: {{{options}}}}}
"""
BATCH = "api_batch: true, api_batch_wait: true, api_batch_poll: 0.01, api_batch_max_requests: 3"


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("BD_STUB_KEY", "sk-test-target-batch")


def _write(tmp_path, url: str, options: str = BATCH):
    path = tmp_path / "registry.yaml"
    path.write_text(REGISTRY.format(url=url, options=options))
    return path


def _letter(body: dict) -> str:
    found = re.search(r"\[(\w)__\]", body["messages"][-1]["content"])
    return f"[{found.group(1)}ind]"


def test_batch_options_of_a_target_are_checked_as_their_flags_and_the_cli_flag_passes_through(tmp_path):
    from orchestration.cli.parser import build_parser
    from orchestration.cli.target import target_run

    target = parse_registry(REGISTRY.format(url="http://127.0.0.1:9/v1", options=BATCH)).target("bd")
    ops = target_ops(target, FAMILIES)
    t2t, judge = ops["t2t_completions"], ops["judge_ratings"]
    assert (t2t.api_batch, t2t.api_batch_wait, t2t.api_batch_max_requests) == (True, True, 3)
    assert (judge.api_batch, judge.api_batch_max_requests) == (True, 3)  # the family's every batch step
    bad = parse_registry(REGISTRY.format(url="http://127.0.0.1:9/v1", options="api_batch: 'yes', api_batch_max_requests: 0")).target("bd")
    with pytest.raises(TargetConfigError) as err:
        target_ops(bad, FAMILIES)
    assert str(err.value) == (
        "target 'bd': option api_batch (--api-batch): 'yes' is not true or false; "
        "option api_batch_max_requests (--api-batch-max-requests): 0 is out of range: expected 1..50000"
    )
    # no option: `dora audit --target bd --api-batch` turns it on for the run
    registry = _write(tmp_path, "http://127.0.0.1:9/v1", options="")
    for flags, on in (([], False), (["--api-batch"], True)):
        args = build_parser().parse_args(["audit", "--target", "bd", "--registry", str(registry), *flags])
        run, _ = target_run(args)
        assert (run.ops["t2t_completions"].api_batch, run.ops["judge_ratings"].api_batch) == (on, on)
        assert run.ops["t2t_completions"].descriptors == ["child"]  # the target's settings kept


def test_a_targets_partition_runs_its_t2t_through_the_batch_api_on_the_partitions_version(dora_home, tmp_path, api_key, capsys):
    import dagster as dg

    from models_inference.backends.batch_ledger import load_ledger
    from models_inference.probes.biasdora.t2t import audit_id_for
    from orchestration.cli import main
    from orchestration.defs.audits.partitions import audit_partitions
    from orchestration.defs.audits.runs import with_model_version
    from orchestration.defs.biasdora.t2t.assets import probe_parts, t2t_completions

    with BatchStubServer() as server:
        server.chat_reply = _letter
        registry = _write(tmp_path, server.base_url)
        config = run_config_for_target(load_registry(registry).target("bd"), FAMILIES, str(registry)).ops["t2t_completions"]
        templates, backend, probe = probe_parts(config, "v3", {"api_key_env": "BD_STUB_KEY"})
        audit_id = audit_id_for(backend, probe.resolved(backend), templates)
        assert audit_id != audit_id_for(with_model_version(backend, "other"), probe.resolved(backend), templates)

        def dry_run() -> tuple[str, ...]:
            assert main(["audit", "--target", "bd", "--registry", str(registry), "--dry-run"]) == 0
            out = capsys.readouterr().out
            assert f"BiasDora T2T: audit {audit_id};" in out  # the partition's audit, not one of the backend's own version
            assert f"audit id {audit_id}" in out  # the T2T plan names the same audit
            return re.search(r"^BiasDora T2T\s+(\d+)\s+(\d+)", out, re.M).groups()

        assert dry_run() == ("2", "4")  # child (noun) x 2 letters x 2 runs in files of at most 3
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions(audit_partitions.name, ["bd@v3"])
        result = dg.materialize([t2t_completions], run_config=dg.RunConfig(ops={"t2t_completions": config}), instance=instance, partition_key="bd@v3")
        assert result.success
        assert [len(server.lines_of(b)) for b in server.created] == [3, 1]
        assert dry_run() == ("0", "0")  # every request landed: nothing left to price
    rows = read_landing("t2t_completions").to_pylist()
    assert len(rows) == 4 and {(r["audit_id"], r["model_version"], r["parse_status"]) for r in rows} == {(audit_id, "v3", "ok")}
    events = read_landing("audits", filters={"audit_id": audit_id}).to_pylist()
    assert {(e["status"], e["target"], e["model_version"]) for e in events} == {("started", "bd", "v3"), ("finished", "bd", "v3")}
    record = load_ledger(audit_id).meta["record"]
    assert (record["step"], record["model_version"], record["target"]) == ("t2t", "v3", "bd")

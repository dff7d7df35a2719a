"""A registry target's partition pins its version and name on every family's audits: ModSCAN's
text analogues on the target's model carry the partition's explicit version and the target
(in-process Dagster runs against the local OpenAI stub server); VLStereoSet pins the version on
its text prior only (the target's model), not on the options' VLM; a partition whose version is
no longer the target's current one cannot generate. Also: ``dora models list`` on a warehouse
that never built ``dim_audits``."""

from __future__ import annotations

import dagster as dg
import duckdb
import pytest

from ingestion.landing import read_landing
from ingestion.registry import load_registry
from ingestion.warehouse import warehouse_path
from orchestration.defs.audits.runs import PARTITION_TAG, TAG_REGISTRY, run_config_for_target
from orchestration.families import FAMILIES
from tests.helpers.openai_server import OpenAIStubServer

REGISTRY = """
targets:
  - name: ms
    families: [modscan]
    backend: openai
    model: stub-model
    base_url: {url}
    api_key_env: MS_STUB_KEY
    version: {{source: explicit, value: '{version}'}}
    options: {{modscan: {{probes: [modscan_text_persona], attributes: [gender], instances: 1, samples: 1,
               conditions: [original], max_new_tokens: 4}}}}
"""


@pytest.fixture
def api_key(monkeypatch):
    """The target's own key variable (``api_key_env``) only: no ``OPENAI_API_KEY``."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MS_STUB_KEY", "sk-test-target")


def _registry(tmp_path, url: str, version: str):
    path = tmp_path / "registry.yaml"
    path.write_text(REGISTRY.format(url=url, version=version))
    return path


def _run_modscan(registry, key: str):
    """Materialise ModSCAN's asset in the run of partition ``key`` (the tags a run request sets)."""
    from orchestration.defs.modscan.assets import modscan_responses

    ops = run_config_for_target(load_registry(registry).target("ms"), FAMILIES, str(registry)).ops
    return dg.materialize(
        [modscan_responses],
        run_config=dg.RunConfig(ops={"modscan_responses": ops["modscan_responses"]}),
        instance=dg.DagsterInstance.ephemeral(),
        tags={PARTITION_TAG: key, TAG_REGISTRY: str(registry)},
        raise_on_error=False,
    )


def test_a_modscan_partition_pins_the_targets_version_and_name_on_its_audit(dora_home, tmp_path, api_key):
    from models_inference.backends.text import load_text_backend
    from models_inference.probes.modscan.text import plan_text_queries, text_audit_id
    from orchestration.defs.audits.runs import with_model_version
    from orchestration.defs.modscan.assets import text_probe_config

    with OpenAIStubServer() as server:
        server.chat_reply = lambda body: "The first person."
        registry = _registry(tmp_path, server.base_url, "v7")
        result = _run_modscan(registry, "ms@v7")
        assert result.success
        config = run_config_for_target(load_registry(registry).target("ms"), FAMILIES).ops["modscan_responses"]
        own = load_text_backend("stub-model", backend="openai", base_url=server.base_url, api_key_env="MS_STUB_KEY")
        expected_id = text_audit_id(with_model_version(own, "v7"), text_probe_config(config).validate())
        assert own.model_version != "v7"  # the backend's own version is another one
        planned = len(plan_text_queries(text_probe_config(config).validate(), expected_id))
        # the target's key variable authorised every call
        assert server.requests and {dict((k.lower(), v) for k, v in r["headers"].items())["authorization"] for r in server.requests} == {
            "Bearer sk-test-target"
        }
    rows = read_landing("modscan_responses").to_pylist()
    assert len(rows) == planned > 0
    assert {(r["audit_id"], r["model_version"]) for r in rows} == {(expected_id, "v7")}
    events = read_landing("audits", filters={"audit_id": expected_id}).to_pylist()
    assert sorted(e["status"] for e in events) == ["finished", "started"]
    assert {(e["target"], e["model_version"], e["modality"]) for e in events} == {("ms", "v7", "modscan_text")}
    md = result.get_asset_materialization_events()[0].materialization.metadata
    assert (md["audit_id"].value, md["model_version"].value) == (expected_id, "v7")


def test_a_modscan_partition_of_an_old_version_generates_nothing(dora_home, tmp_path, api_key):
    with OpenAIStubServer() as server:
        registry = _registry(tmp_path, server.base_url, "v8")  # the registry moved on to v8
        result = _run_modscan(registry, "ms@v7")
        assert not result.success and server.requests == []
    cause = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error.cause
    assert cause.cls_name == "VersionError"
    assert "partition 'ms@v7' asks for version 'v7' of target 'ms', but the registry now resolves it to 'v8'" in cause.message
    assert read_landing("modscan_responses").num_rows == 0


def test_vlstereoset_pins_the_partition_version_on_its_text_prior_only(dora_home, monkeypatch):
    from orchestration.defs.vlstereoset.assets import build_scorers
    from orchestration.defs.vlstereoset.config import TEXT_PRIOR, VLStereoSetConfig

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-vl")
    with OpenAIStubServer() as server:
        config = VLStereoSetConfig(
            text_model="stub-model",
            text_backend="openai",
            text_base_url=server.base_url,
            vlm_model="stub-vlm",
            vlm_backend="openai",
            vlm_base_url=server.base_url,
        )
        server.models = ["stub-model", "stub-vlm"]
        scorers = build_scorers(config, [TEXT_PRIOR, "idm", "mcq"], "v7")
        own = build_scorers(config, ["mcq"])[0].model_version
    assert [(s.name, s.model_version) for s in scorers] == [(scorers[0].name, "v7"), ("idm", "vlstereoset-4.1"), (scorers[2].name, own)]
    assert own != "v7" and own.startswith("stub-vlm")


def test_models_list_shows_no_last_audit_when_dim_audits_was_never_built(dora_home, tmp_path, capsys):
    """A home whose warehouse holds other families' marts but no ``dim_audits`` (e.g. only
    ``dora audit --family vlstereoset`` runs): every target's last audit is ``-``, exit 0."""
    from orchestration.cli import main

    con = duckdb.connect(str(warehouse_path()))
    con.execute("create table agg_vlstereoset_metrics (audit_id varchar)")
    con.close()
    registry = tmp_path / "registry.yaml"
    registry.write_text(
        "targets:\n  - {name: a, model: smollm2-135m, version: {source: explicit, value: v1}}\n"
        "  - {name: b, model: smollm2-135m, version: {source: explicit, value: v2}}\n"
    )
    assert main(["models", "list", "--registry", str(registry), "--no-resolve", "--format", "csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    from orchestration.families import FAMILIES

    families = [f.name for f in FAMILIES if "t2t" in f.target_models]
    assert [line for line in out[1:] if line] == [
        f"{t},{f},t2t,transformers,smollm2-135m,explicit,(not read),-,-,-,-,-,ok" for t in ("a", "b") for f in families
    ]


CF_REGISTRY = """
targets:
  - name: cf
    families: [counterfactual]
    backend: openai
    model: stub-model
    base_url: {url}
    api_key_env: CF_STUB_KEY
    version: {{source: explicit, value: v5}}
    options: {{counterfactual: {{occupations: [doctor], sets_per_occupation: 1, prompts: [Describe], seeds: 1,
               max_new_tokens: 4}}}}
"""


def test_a_counterfactual_partition_calls_the_api_with_the_targets_key(dora_home, tmp_path, monkeypatch):
    """The counterfactual text sets on a target's API model authenticate with the target's own
    ``api_key_env`` (as BiasDora and ModSCAN do), and land under the partition's version."""
    from orchestration.defs.counterfactual.assets import counterfactual_responses

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("CF_STUB_KEY", "sk-test-cf")
    with OpenAIStubServer() as server:
        server.chat_reply = lambda body: "A calm person."
        registry = tmp_path / "registry.yaml"
        registry.write_text(CF_REGISTRY.format(url=server.base_url))
        ops = run_config_for_target(load_registry(registry).target("cf"), FAMILIES, str(registry)).ops
        result = dg.materialize(
            [counterfactual_responses],
            run_config=dg.RunConfig(ops={"counterfactual_responses": ops["counterfactual_responses"]}),
            instance=dg.DagsterInstance.ephemeral(),
            tags={PARTITION_TAG: "cf@v5", TAG_REGISTRY: str(registry)},
            raise_on_error=False,
        )
        assert result.success
        assert server.requests and {dict((k.lower(), v) for k, v in r["headers"].items())["authorization"] for r in server.requests} == {
            "Bearer sk-test-cf"
        }
    rows = read_landing("counterfactual_responses").to_pylist()
    assert rows and {r["model_version"] for r in rows} == {"v5"}

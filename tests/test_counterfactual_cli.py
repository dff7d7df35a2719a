"""dora audit's counterfactual flags: --family and --cf-* become the CounterfactualConfig of
every counterfactual op; the assets are in the audit job."""

import pytest

from orchestration.cli.flags import audit_run_config
from orchestration.cli.parser import build_parser
from orchestration.defs.counterfactual.config import COUNTERFACTUAL_OPS


def _ops(*argv):
    return audit_run_config(build_parser().parse_args(["audit", *argv])).ops


def test_default_audit_runs_the_quick_counterfactual_sample():
    ops = _ops()
    cfgs = [ops[op] for op in COUNTERFACTUAL_OPS]
    assert all(c == cfgs[0] for c in cfgs)
    cfg = cfgs[0]
    assert cfg.enabled and cfg.model == "smollm2-135m" and cfg.subsets == ["race_gender"]
    assert cfg.occupations == ["doctor"] and cfg.runs == 1 and cfg.temperature == 0.75
    assert len(cfg.prompts) == 10 and cfg.max_new_tokens == 32


def test_probe_selection_and_flags():
    assert not _ops("--family", "biasdora")["counterfactual_responses"].enabled
    assert _ops("--family", "counterfactual", "--family", "biasdora")["counterfactual_responses"].enabled
    cfg = _ops(
        "--cf-occupations",
        "",
        "--cf-runs",
        "3",
        "--cf-max-new-tokens",
        "512",
        "--cf-numeric-max-new-tokens",
        "0",
        "--cf-mitigations",
        "M1,M3",
        "--cf-judge-backend",
        "none",
    )["counterfactual_toxicity"]
    assert cfg.occupations == [] and cfg.runs == 3 and cfg.max_new_tokens == 512 and cfg.numeric_max_new_tokens is None
    assert cfg.mitigations == ["M1", "M3"] and cfg.judge_backend == "none"


def test_assets_are_in_the_audit_job():
    from orchestration.definitions import defs
    from orchestration.instance import AUDIT_JOB

    keys = {k.to_user_string() for k in defs.resolve_job_def(AUDIT_JOB).asset_layer.executable_asset_keys}
    assert {
        "landing/counterfactual_responses",
        "landing/counterfactual_toxicity",
        "landing/counterfactual_stereotype_flags",
        "fct_max_toxicity",
        "agg_max_toxicity",
        "fct_group_word_pmi",
        "agg_numeric_ratings",
    } <= keys


@pytest.mark.slow
def test_assets_materialise_through_dagster(dora_home, monkeypatch):
    """The probe and toxicity assets run under Dagster with an OpenAI-compatible model (local
    test server); the filter asset finds no warehouse yet and lands nothing; a disabled run skips."""
    import dagster as dg

    from ingestion.landing import read_landing
    from orchestration.defs.counterfactual.assets import counterfactual_assets
    from orchestration.defs.counterfactual.config import CounterfactualConfig
    from tests.helpers.openai_server import OpenAIStubServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "7" if "Rating:" in str(req["messages"]) else "calm, careful, kind"
        cfg = CounterfactualConfig(
            model="gpt-stub",
            backend="openai",
            base_url=server.base_url,
            occupations=["nurse"],
            subsets=["physical_gender"],
            prompts=["Characteristics", "Hiring"],
            judge_backend="openai",
            judge_model="gpt-stub",
            judge_base_url=server.base_url,
            progress=False,
        )
        ops = {op: cfg for op in ("counterfactual_responses", "counterfactual_toxicity", "counterfactual_stereotype_filter")}
        result = dg.materialize(counterfactual_assets, run_config=dg.RunConfig(ops=ops))
    assert result.success
    md = {m.asset_key.to_user_string(): m.metadata for m in result.asset_materializations_for_node("counterfactual_responses")}
    assert md["landing/counterfactual_responses"]["rows_generated"].value == 20
    tox = {m.asset_key.to_user_string(): m.metadata for m in result.asset_materializations_for_node("counterfactual_toxicity")}
    assert {r["status"] for r in read_landing("counterfactual_responses", ["status"]).to_pylist()} == {"ok"}
    assert read_landing("counterfactual_toxicity").num_rows == 20, tox
    assert read_landing("counterfactual_lexicon").num_rows > 861
    off = CounterfactualConfig(enabled=False)
    skipped = dg.materialize(counterfactual_assets[:1], run_config=dg.RunConfig(ops={"counterfactual_responses": off}))
    assert skipped.success and read_landing("counterfactual_responses").num_rows == 20

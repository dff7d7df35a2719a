"""dora audit's counterfactual flags: --probe and --cf-* become the CounterfactualConfig of
every counterfactual op; the assets are in the audit job."""

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
    assert cfg.enabled and cfg.model == "smollm2-135m" and cfg.subsets == ["race_gender", "physical_gender"]
    assert cfg.occupations == ["doctor"] and cfg.seeds == 1 and cfg.temperature == 0.75
    assert len(cfg.prompts) == 10 and cfg.max_new_tokens == 40


def test_probe_selection_and_flags():
    assert not _ops("--probe", "biasdora")["counterfactual_responses"].enabled
    assert _ops("--probe", "counterfactual", "--probe", "biasdora")["counterfactual_responses"].enabled
    cfg = _ops("--cf-occupations", "", "--cf-seeds", "3", "--cf-max-new-tokens", "512", "--cf-numeric-max-new-tokens", "0",
               "--cf-mitigations", "M1,M3", "--cf-judge-backend", "none")["counterfactual_toxicity"]
    assert cfg.occupations == [] and cfg.seeds == 3 and cfg.max_new_tokens == 512 and cfg.numeric_max_new_tokens is None
    assert cfg.mitigations == ["M1", "M3"] and cfg.judge_backend == "none"


def test_assets_are_in_the_audit_job():
    from orchestration.definitions import defs
    from orchestration.instance import AUDIT_JOB

    keys = {k.to_user_string() for k in defs.resolve_job_def(AUDIT_JOB).asset_layer.executable_asset_keys}
    assert {"landing/counterfactual_responses", "landing/counterfactual_toxicity", "landing/counterfactual_stereotype_flags",
            "fct_max_toxicity", "agg_max_toxicity", "fct_group_word_pmi", "agg_numeric_ratings"} <= keys

"""`dora audit --dry-run` estimates every step of the audit, not only BiasDora's generation: each
family's record contributes its named steps (model load, generation, scoring, dbt), each with a
time from a rate measured in BENCHMARKS.md or saying it is assumed or unknown, and the CLI adds
them up without naming a family."""

from __future__ import annotations

import re

import pytest


def test_every_step_has_a_time_and_says_whether_it_is_measured_or_assumed():
    from orchestration.defs.biasdora.dry_run import ASSUMED_SIGNIFICANT_PER_COMPLETION, MEASURED_STEPS, step_estimates
    from orchestration.estimates import format_estimate

    steps = step_estimates(9464, 170.0, judge_runs=2, judge_on=True, significant=None)
    by_name = {s.step: s for s in steps}
    assert by_name["T2T generation"].seconds == pytest.approx(9464 / 170.0)
    n = round(9464 * ASSUMED_SIGNIFICANT_PER_COMPLETION)
    judge = by_name["LLM judge (2 runs per association)"]
    assert judge.seconds == pytest.approx(n * 2 / MEASURED_STEPS["judgements per second"])
    assert judge.basis == "assumed" and judge.source.startswith(f"{n} significant associations")
    assert {s.basis for s in steps} <= {"measured", "assumed"}
    text = format_estimate([("biasdora", s) for s in steps])
    total = int(round(sum(s.seconds for s in steps)))
    assert text.splitlines()[-1].startswith(f"  total: {total // 60} min {total % 60:02d} s on a free machine")
    # an earlier audit's count is a measurement; a judge without a measured rate is unknown, not zero
    measured = step_estimates(100, None, judge_runs=1, judge_on=True, significant=(12, "audit a1"), judge_measured=False)
    named = {s.step: s for s in measured}
    assert (named["T2T generation"].seconds, named["T2T generation"].basis) == (None, "unknown")
    assert (named["sentiment + toxicity scoring"].basis, named["sentiment + toxicity scoring"].source) == (
        "measured",
        "12 significant associations in audit a1",
    )
    assert (named["LLM judge (1 run per association)"].seconds, named["LLM judge (1 run per association)"].basis) == (None, "unknown")
    assert "plus 2 step(s) of unknown time" in format_estimate([("biasdora", s) for s in measured]).splitlines()[-1]


def test_a_step_must_say_measured_assumed_or_unknown():
    from orchestration.family import EstimatedStep

    with pytest.raises(ValueError, match="basis must be measured, assumed or unknown"):
        EstimatedStep("x", 1.0, "guessed", "")
    with pytest.raises(ValueError, match="an unknown step has no seconds"):
        EstimatedStep("x", 1.0, "unknown", "")
    with pytest.raises(ValueError, match="an unknown step has no seconds"):
        EstimatedStep("x", None, "measured", "")


def test_the_load_factor_scales_the_total_by_the_runnable_processes_per_core():
    from orchestration.estimates import format_estimate, load_factor
    from orchestration.family import EstimatedStep

    assert load_factor(0.0, 2) == 1.0  # a free machine: the measured rates
    assert load_factor(14.0, 2) == 8.0  # 14 runnable processes beside the audit's 2 threads on 2 cores
    text = format_estimate([("f", EstimatedStep("s", 60.0, "measured", "x"))], load=6.0, cores=2)
    assert text.splitlines()[-1].startswith("  at the machine's load now (6.0 on 2 cores): about 4 min 00 s (x4.0; assumed:")


def test_each_family_contributes_named_steps_to_the_default_estimate(dora_home):
    """The default audit (every family on the embedded model): every family of FAMILIES has an
    estimate in its record, and each gives its own named steps, all of them with a time (the
    embedded defaults' rates are measured): model load, generation and dbt at least."""
    from orchestration import families as fam
    from orchestration.cli.flags import op_run_configs
    from orchestration.cli.parser import build_parser
    from orchestration.estimates import estimate_steps

    ops = op_run_configs(build_parser().parse_args(["audit"]))
    rows = estimate_steps(fam.FAMILIES, ops)
    by_family: dict[str, list] = {}
    for family, step in rows:
        by_family.setdefault(family, []).append(step)
    assert set(by_family) == {"every audit", *(f.name for f in fam.FAMILIES)}
    for family in fam.FAMILIES:
        steps = by_family[family.name]
        names = " | ".join(s.step for s in steps)
        assert all(s.seconds is not None and s.seconds > 0 or s.step == "T2T generation" for s in steps), (family.name, steps)
        assert all(s.basis in ("measured", "assumed") and s.source for s in steps), (family.name, steps)
        assert "model load" in names, (family.name, names)
        assert re.search(r"dbt", names), (family.name, names)
    # the generation steps name what they generate, counted by the family's plan
    assert any(s.step == "120 responses (at most)" for s in by_family["counterfactual"])
    assert any(s.step == "50 text-analogue queries" for s in by_family["modscan"])
    assert any(s.step == "text prior, 110 captions" for s in by_family["vlstereoset"])
    assert by_family["biasdora"][1].seconds == pytest.approx(9464 / 170.0)


def test_a_family_that_is_off_or_on_an_unmeasured_model_says_so(dora_home):
    from orchestration import families as fam
    from orchestration.cli.flags import op_run_configs
    from orchestration.cli.parser import build_parser
    from orchestration.estimates import estimate_steps

    ops = op_run_configs(build_parser().parse_args(["audit", "--family", "modscan", "--modscan-model", "some/other-model"]))
    rows = estimate_steps(fam.FAMILIES, ops)
    assert {family for family, _ in rows} == {"every audit", "modscan"}  # the others are off
    steps = {s.step: s for family, s in rows if family == "modscan"}
    assert steps["50 text-analogue queries"].basis == "unknown" and steps["model load"].seconds is None


def test_the_default_dry_run_prints_every_familys_steps(dora_home, capsys):
    from orchestration.cli import main

    assert main(["audit", "--dry-run"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("estimated time per step") :]
    for family, step in (
        ("every audit", "start-up and Dagster run"),
        ("biasdora", "T2T generation"),
        ("biasdora", "LLM judge"),
        ("counterfactual", "120 responses (at most)"),
        ("modscan", "50 text-analogue queries"),
        ("vlstereoset", "text prior, 110 captions"),
    ):
        assert f"  {family}: {step}" in section
    # a fresh home has no earlier audit: the number of significant associations is assumed
    assert "(assumed: 68 significant associations" in section and "  total: " in section
    assert "at the machine's load now" in section
    # --family narrows the estimate to that family's steps
    assert main(["audit", "--dry-run", "--family", "modscan"]) == 0
    section = capsys.readouterr().out.split("estimated time per step", 1)[1]
    assert "  modscan: " in section and "biasdora:" not in section and "counterfactual:" not in section


def test_a_rerun_of_a_landed_audit_skips_generation_scoring_and_the_judge():
    """A re-run of an audit whose prompts have all landed: its associations are scored already
    and the dbt builds find nothing new (bench_incremental's re-run), so BiasDora's part is one
    model load and the two builds, not the judge again (the start-up is every audit's)."""
    from orchestration.defs.biasdora.dry_run import MEASURED_STEPS, step_estimates

    steps = step_estimates(0, 170.0, judge_runs=1, judge_on=True, significant=(55, "audit a1"), rerun=True)
    assert [s.step for s in steps] == ["model load (T2T)", "T2T generation", "dbt builds (nothing new)", "scoring and judge"]
    expected = MEASURED_STEPS["model load"] + MEASURED_STEPS["dbt builds, nothing new"]
    assert sum(s.seconds for s in steps) == pytest.approx(expected) == pytest.approx(9.1)

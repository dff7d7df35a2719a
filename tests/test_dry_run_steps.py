"""`dora audit --dry-run` estimates every step of the embedded default audit, not only its
generation: each step's time from a rate measured in BENCHMARKS.md, and what is assumed says so
(the number of significant associations, unless an earlier audit of the model measured it)."""

from __future__ import annotations

import pytest


def test_every_step_has_a_time_and_says_whether_it_is_measured_or_assumed():
    from orchestration.defs.biasdora.dry_run import ASSUMED_SIGNIFICANT_PER_COMPLETION, MEASURED_STEPS, format_steps, step_estimates

    steps = step_estimates(9464, 170.0, judge_runs=2, judge_on=True, significant=None)
    by_name = {name: (sec, source) for name, sec, source in steps}
    assert by_name["T2T generation"][0] == pytest.approx(9464 / 170.0)
    n = round(9464 * ASSUMED_SIGNIFICANT_PER_COMPLETION)
    judge_sec, judge_source = by_name["LLM judge (2 runs per association)"]
    assert judge_sec == pytest.approx(n * 2 / MEASURED_STEPS["judgements per second"])
    assert judge_source.startswith(f"assumed: {n} significant associations")
    assert all(source.startswith(("measured", "assumed")) for _, _, source in steps)
    text = format_steps(steps)
    total = sum(sec for _, sec, _ in steps)
    assert text.splitlines()[-1].startswith(f"  total: {int(round(total)) // 60} min {int(round(total)) % 60:02d} s")
    # an earlier audit's count is a measurement; a judge without a measured rate is unknown, not zero
    measured = step_estimates(100, None, judge_runs=1, judge_on=True, significant=(12, "audit a1"), judge_measured=False)
    named = {name: (sec, source) for name, sec, source in measured}
    assert named["T2T generation"] == (None, "unknown rate")
    assert named["sentiment + toxicity scoring"][1] == "measured: 12 significant associations in audit a1"
    assert named["LLM judge (1 run(s) per association)"] == (None, "unknown: no measured rate for this judge")
    assert format_steps(measured).splitlines()[-1].endswith("plus 2 step(s) of unknown time; more when other processes share the CPU")


def test_the_default_dry_run_prints_the_steps(dora_home, capsys):
    from orchestration.cli import main

    assert main(["audit", "--dry-run", "--family", "biasdora"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("estimated time per step") :]
    for step in ("model load", "T2T generation", "dbt builds", "sentiment + toxicity scoring", "LLM judge"):
        assert f"  {step}" in section
    # a fresh home has no earlier audit: the number of significant associations is assumed
    assert "(assumed: 68 significant associations" in section and "  total: " in section


def test_a_rerun_of_a_landed_audit_skips_generation_scoring_and_the_judge():
    """A re-run of an audit whose prompts have all landed: its associations are scored already
    and the dbt builds find nothing new (bench_incremental's re-run), so the estimate is the
    start-up, one model load and the two builds, not the judge again."""
    from orchestration.defs.biasdora.dry_run import MEASURED_STEPS, step_estimates

    steps = step_estimates(0, 170.0, judge_runs=1, judge_on=True, significant=(55, "audit a1"), rerun=True)
    assert [name for name, _, _ in steps] == [
        "start-up and Dagster run",
        "model load (T2T)",
        "T2T generation",
        "dbt builds (nothing new)",
        "scoring and judge",
    ]
    expected = MEASURED_STEPS["start-up and Dagster run"] + MEASURED_STEPS["model load"] + MEASURED_STEPS["dbt builds, nothing new"]
    assert sum(sec for _, sec, _ in steps) == pytest.approx(expected) == pytest.approx(20.8)

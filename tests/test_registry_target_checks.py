"""A registry target is checked like the flags it stands for, before anything starts, and
``dora audit --target NAME --dry-run`` plans what the target's run would run.

Through ``orchestration.cli.main`` in this process (as ``tests/test_hostile_inputs.py`` does for
its argparse cases): a new interpreter per case would spend its time importing."""

from __future__ import annotations

import re

import pytest

from ingestion.registry import load_registry
from orchestration.defs.audits.runs import run_config_for_target
from orchestration.families import FAMILIES

REGISTRY = """
targets:
  - {name: bd, family: biasdora, model: smollm2-135m, version: {source: explicit, value: v1}, probe: {settings: [singular, verb], runs: 2, per_dimension: 1, letters: abc}}
  - {name: cf, family: counterfactual, model: smollm2-135m, version: {source: explicit, value: v1}, options: {occupations: [nurse], runs: 2, prompts: [Characteristics]}}
  - {name: ms, family: modscan, model: smollm2-135m, version: {source: explicit, value: v1}, options: {runs: 2, instances: 1}}
  - {name: vl, family: vlstereoset, model: tiny, backend: openai, base_url: "http://127.0.0.1:9/v1", version: {source: explicit, value: v1}, options: {scorers: [idm], items: all}}
  - {name: bad-family, family: nosuchfamily, model: m, version: {source: explicit, value: v1}}
  - {name: bad-option, family: modscan, model: m, version: {source: explicit, value: v1}, options: {rnus: 2}}
  - {name: bad-type, family: counterfactual, model: m, version: {source: explicit, value: v1}, options: {runs: three}}
  - {name: bad-range, family: modscan, model: m, version: {source: explicit, value: v1}, options: {runs: 0}}
  - {name: bad-cap, family: modscan, model: smollm2-135m, version: {source: explicit, value: v1}, options: {runs: 100000, instances: 0}}
  - {name: bad-path, family: vlstereoset, model: m, version: {source: explicit, value: v1}, options: {csv: /no/such/file.csv}}
  - {name: bad-probe, model: smollm2-135m, version: {source: explicit, value: v1}, probe: {runs: 100000}}
  - {name: bad-many, families: [counterfactual, modscan], model: m, version: {source: explicit, value: v1}, options: {counterfactual: {runs: 0}, modscan: {runs: 0}}}
  - {name: painter, modality: t2i, backend: diffusers, model: /no/sd, version: {source: explicit, value: v1}, probe: {runs: 3, descriptors: [child]}}
"""

BAD = [
    ("bad-family", r"^dora audit: error: target 'bad-family': unknown probe family 'nosuchfamily'; families: biasdora, "),
    ("bad-option", r"^dora audit: error: target 'bad-option': unknown option 'rnus' for family modscan \(did you mean runs\?\)"),
    ("bad-type", r"^dora audit: error: target 'bad-type': option runs \(--cf-runs\): 'three' is not an integer$"),
    ("bad-range", r"^dora audit: error: target 'bad-range': option runs \(--modscan-runs\): 0 is out of range: expected 1\.\."),
    ("bad-cap", r"^dora audit: error: target 'bad-cap': modscan text analogues: .* plans 12,400,000 rows, more than the 1,000,000"),
    ("bad-path", r"^dora audit: error: target 'bad-path': csv /no/such/file.csv: no such file$"),
    ("bad-probe", r"^dora audit: error: target 'bad-probe': probe.runs \(--runs\): 100000 is out of range: expected 1\.\."),
    (
        "bad-many",
        r"^dora audit: error: target 'bad-many': option runs \(--cf-runs\): 0 is out of range: expected 1\.\.1000; "
        r"option runs \(--modscan-runs\): 0 is out of range: expected 1\.\.100000$",
    ),
    ("no-such-target", r"^dora audit: error: no audit target 'no-such-target' in the registry; registered: bd, cf, ms, vl, "),
]


@pytest.fixture
def registry(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("DORA_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    path = tmp_path / "registry.yaml"
    path.write_text(REGISTRY)
    return path


def _main(args) -> int:
    from orchestration.cli import main

    try:
        return main(args)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize("name,message", BAD, ids=[b[0] for b in BAD])
def test_a_bad_target_is_one_line_exit_2_before_anything_starts(registry, capsys, monkeypatch, name, message, dry_run):
    from models_inference.backends.text import TransformersBackend
    from orchestration import instance

    started = []  # what a refused target must not start (checked instead of seconds, which load stretches)
    monkeypatch.setattr(TransformersBackend, "load", classmethod(lambda cls, *a, **k: started.append("model")))
    monkeypatch.setattr(instance, "open_instance", lambda *a, **k: started.append("instance"))
    code = _main(["audit", "--registry", str(registry), "--target", name, *(["--dry-run"] if dry_run else [])])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1 and re.search(message, lines[0]), lines
    assert "Traceback" not in captured.err and "KeyError" not in captured.err and not captured.out
    assert started == [], started
    home = registry.parent / "home"
    if dry_run:  # a dry run writes the instance's dagster.yaml as every dry run does; no storage, no partition
        assert not [p for p in (home / "dagster").rglob("*") if p.name != "dagster.yaml"]
    else:
        assert not (home / "dagster").exists()


def _dry_run(registry, capsys, name) -> str:
    assert _main(["audit", "--registry", str(registry), "--target", name, "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert not captured.err.strip(), captured.err
    return captured.out


def _count(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    assert found, text
    return int(found.group(1).replace(",", ""))


def test_the_dry_run_of_each_family_target_plans_what_its_run_config_runs(registry, capsys):
    targets = load_registry(registry)

    def ops(name):  # the run config the target's partition run gets (sensor, schedule, dora audit --target)
        return run_config_for_target(targets.target(name), FAMILIES, str(registry)).ops

    # counterfactual: responses of the run config's sets
    from models_inference.probes.counterfactual import probe as cf
    from orchestration.defs.counterfactual.assets import build_image_sets, build_sets, probe_config

    out = _dry_run(registry, capsys, "cf")
    config = ops("cf")["counterfactual_responses"]
    assert config.runs == 2 and config.occupations == ["nurse"] and config.enabled
    rows = len(cf.plan(build_sets(config, build_image_sets(config)), probe_config(config)))
    assert out.splitlines()[0].startswith(
        "dora audit --dry-run --target cf: families counterfactual, model smollm2-135m "
        "(transformers, t2t), version v1 (explicit: version.value in the registry)"
    )
    assert _count(r"counterfactual: \d+ sets x 1 prompts on smollm2-135m \(transformers\): ([\d,]+) responses", out) == rows
    assert "modscan" not in out and "vlstereoset" not in out and "t2t " not in out  # its family only
    # the time estimate covers the target's run config: its family's steps on its sets' responses, no other family's
    estimate = out[out.index("estimated time per step") :]
    assert f"  counterfactual: {rows:,} responses (at most): " in estimate and "  total: " in estimate
    assert {ln.split(":")[0].strip() for ln in estimate.splitlines()[1:-2]} == {"every audit", "counterfactual"}

    # modscan: `instances` (the flag --modscan-instances without its prefix) is instances_per_scenario
    from models_inference.probes.modscan.text import plan_text_queries
    from orchestration.defs.modscan.assets import text_probe_config

    out = _dry_run(registry, capsys, "ms")
    config = ops("ms")["modscan_responses"]
    assert config.instances_per_scenario == 1 and config.runs == 2
    assert _count(r"modscan: ([\d,]+) text-analogue queries", out) == len(plan_text_queries(text_probe_config(config), "x"))
    assert "counterfactual" not in out

    # biasdora: the T2T prompts of the target's probe settings (what its T2T asset runs)
    from orchestration.defs.biasdora.dry_run import t2t_plan_lines

    out = _dry_run(registry, capsys, "bd")
    t2t = ops("bd")["t2t_completions"]
    assert (t2t.settings, t2t.runs, t2t.per_dimension, t2t.letters) == (["singular", "verb"], 2, 1, "abc")
    lines = t2t_plan_lines(t2t)[0]
    assert sum(line.prompts for line in lines) == 9 * 2 * 3 * 2 == _count(r"(?m)^total\s+([\d,]+)", out)
    assert [line.setting for line in lines] == ["singular", "verb"] and "t2i" not in out


def test_the_dry_run_of_a_vlstereoset_target_plans_its_items(registry, capsys):
    """On a stub endpoint (nothing is called: the plan loads no model; reading the CSV loads spaCy)."""
    from models_inference.probes.vlstereoset.dataset import load_vlstereoset_csv, synthetic_csv_path
    from orchestration.defs.vlstereoset.config import selected_scorers

    out = _dry_run(registry, capsys, "vl")
    config = run_config_for_target(load_registry(registry).target("vl"), FAMILIES, str(registry)).ops["vlstereoset_probe"]
    assert (config.text_model, config.text_backend, config.text_base_url) == ("tiny", "openai", "http://127.0.0.1:9/v1")
    assert _count(r"vlstereoset: ([\d,]+) items", out) == len(load_vlstereoset_csv(config.csv or synthetic_csv_path()).items)
    assert _count(r"x (\d+) scorers", out) == len(selected_scorers(config)) == 1


@pytest.mark.slow  # planning T2I rows normalises the paper's T2I lists with spaCy (~10 s)
def test_the_dry_run_of_a_t2i_target_plans_its_images_and_no_t2t(registry, capsys):
    from orchestration.defs.biasdora.dry_run import t2i_plan_lines

    targets = load_registry(registry)

    def ops(name):
        return run_config_for_target(targets.target(name), FAMILIES, str(registry)).ops

    # its model draws (probe.runs images per descriptor and setting); the T2T probe is off
    out = _dry_run(registry, capsys, "painter")
    vision = ops("painter")["t2i_images"]
    assert (vision.t2i_model, vision.images_per_descriptor, vision.descriptors) == ("/no/sd", 3, ["child"])
    assert not ops("painter")["t2t_completions"].enabled
    planned = t2i_plan_lines(vision.t2i_settings, vision.descriptors, vision.per_dimension, vision.images_per_descriptor)
    assert sum(line.prompts for line in planned) == 3 * 2 == _count(r"(?m)^total\s+([\d,]+)", out)  # child x 2 settings x 3 images
    assert "t2t " not in out and "families biasdora, model /no/sd (diffusers, t2i)" in out.splitlines()[0]


def test_models_list_marks_an_invalid_target(registry, capsys):
    assert _main(["models", "list", "--registry", str(registry), "--no-resolve", "--format", "csv"]) == 0
    rows = {line.split(",")[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["cf"].endswith(",ok") and rows["ms"].endswith(",ok") and rows["bd"].endswith(",ok")
    known = ", ".join(f.name for f in FAMILIES)
    assert rows["bad-family"].endswith(f"\"invalid: unknown probe family 'nosuchfamily'; families: {known}\"")
    assert ",invalid: option runs (--cf-runs): 'three' is not an integer" in rows["bad-type"]

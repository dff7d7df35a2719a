"""Configuration stated once: every family's ``dora audit`` flags come from its Config fields
(default, help, choices, range), each default is printed once, and a value outside a field's
range is one argparse line (exit 2) before anything starts, for every family."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from orchestration import families as fam
from orchestration.cli.flags import op_run_configs
from orchestration.cli.parser import build_parser


def _ops(*argv):
    return op_run_configs(build_parser().parse_args(["audit", *argv]))


def test_no_progress_reaches_every_family():
    """--no-progress used to be ignored by ModSCAN (it read an attribute that never existed)."""
    ops = _ops("--probe", "modscan", "--no-progress")
    assert ops["modscan_responses"].progress is False
    assert all(cfg.progress is False for cfg in ops.values() if "progress" in type(cfg).model_fields)
    assert _ops()["modscan_responses"].progress is True


def test_max_error_share_and_probe_selection_reach_every_family():
    ops = _ops("--max-error-share", "0.5", "--probe", "vlstereoset")
    assert {cfg.max_error_share for cfg in ops.values() if "max_error_share" in type(cfg).model_fields} == {0.5}
    assert ops["vlstereoset_probe"].enabled and not ops["modscan_responses"].enabled
    assert not ops["counterfactual_responses"].enabled


def test_user_facing_flag_names_still_parse():
    ops = _ops("--modscan-samples", "7", "--faces", "/f", "--prefix", "sr", "--modscan-no-person-check",
               "--vlstereoset-csv", "x.csv", "--images", "/imgs", "--vlstereoset-download",
               "--cf-numeric-max-new-tokens", "0", "--cf-mitigations", "M1", "--model", "m", "--backend", "openai")
    ms, vls, cf = ops["modscan_responses"], ops["vlstereoset_probe"], ops["counterfactual_responses"]
    assert (ms.samples, ms.faces, ms.prefixes, ms.person_check) == (7, "/f", ["none", "sr"], False)
    assert (vls.csv, vls.images, vls.download_images) == ("x.csv", "/imgs", True)
    assert cf.numeric_max_new_tokens is None and cf.mitigations == ["M1"]
    assert (cf.model, cf.backend) == ("m", "openai") == (ops["t2t_completions"].model, ops["t2t_completions"].backend)
    assert _ops("--vlstereoset-images", "/other")["vlstereoset_probe"].images == "/other"


def test_defaults_come_from_the_config_fields():
    ops = _ops()
    for family in fam.FAMILIES:
        for op, cls in family.configs.items():
            for name, field in cls.model_fields.items():
                if name in ("enabled", "registry"):
                    continue
                default = field.get_default(call_default_factory=True)
                if family.adjust is None:  # no preset rewrites a value
                    assert getattr(ops[op], name) == default, (op, name)


def _help(*argv) -> str:
    proc = subprocess.run([sys.executable, "-m", "orchestration.cli", "audit", *argv], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_help_lists_the_families_and_prints_each_default_once():
    main = _help("--help")
    assert all(f.name in main for f in fam.FAMILIES)
    assert "--modscan-samples" not in main and "--max-error-share" in main
    assert "(default: True)" not in main and "(default: None)" not in main
    for family in fam.FAMILIES:
        text = _help("--help-family", family.name)
        own = [f for f in family.flags if f.flag not in main]
        assert own and all(f.flag in text for f in own if f.name is None or f.flag.startswith(family.flag_prefix))
        for line in text.splitlines():
            assert line.count("default") <= 1, line
        assert "(default: True)" not in text and "(default: None)" not in text


def _out_of_range_cases():
    cases = []
    for family in fam.FAMILIES:
        # the family's own first range-checked flag (not one it shares with another family)
        flag = next(f for f in family.flags if "le" in f.bounds and f.validator is None and f.flag.startswith(family.flag_prefix))
        value = flag.bounds["le"] + (1 if flag.kind is int else 0.5)
        cases.append((family.name, flag.flag, str(value)))
    return cases


@pytest.mark.parametrize("family,flag,value", _out_of_range_cases(), ids=[c[0] for c in _out_of_range_cases()])
def test_out_of_range_is_one_line_exit_2_fast(tmp_path, family, flag, value):
    import resource

    env = {**os.environ, "DORA_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "orchestration.cli", "audit", flag, value], env=env,
                          capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"dora audit: error: argument {flag}: ") and "out of range" in last, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "dagster").exists() and not (tmp_path / "home").exists()
    # under 2 s of work (about 1 s on an idle machine: the parser, no Dagster run, no model); the
    # wall clock only loosely, as other processes may share the CPU
    assert cpu < 2 and elapsed < 30, (cpu, elapsed)


def test_every_range_checked_flag_matches_its_field():
    """The argparse check and the Config agree: the bound itself parses and builds the Config."""
    for family in fam.FAMILIES:
        for flag in family.flags:
            if "le" in flag.bounds and flag.validator is None and not flag.repeat:
                bound = flag.bounds["le"]
                ops = _ops(flag.flag, str(bound))
                op = next(op for op, cls in family.configs.items() if cls is flag.targets[0][0])
                assert getattr(ops[op], flag.field_name) == bound

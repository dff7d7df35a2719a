"""Configuration stated once: every family's ``dora audit`` flags come from its Config fields
(default, help, choices, range), each default is printed once, and a value outside a field's
range is one argparse line (exit 2) before anything starts, for every family."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestration import families as fam
from orchestration.cli.flags import op_run_configs
from orchestration.cli.parser import build_parser
from tests.helpers.dora_cli import dora_process_imports


def _ops(*argv):
    return op_run_configs(build_parser().parse_args(["audit", *argv]))


def test_no_progress_reaches_every_family():
    """--no-progress used to be ignored by ModSCAN (it read an attribute that never existed)."""
    ops = _ops("--family", "modscan", "--no-progress")
    assert ops["modscan_responses"].progress is False
    assert all(cfg.progress is False for cfg in ops.values() if "progress" in type(cfg).model_fields)
    assert _ops()["modscan_responses"].progress is True


def test_max_error_share_and_probe_selection_reach_every_family():
    ops = _ops("--max-error-share", "0.5", "--family", "vlstereoset")
    assert {cfg.max_error_share for cfg in ops.values() if "max_error_share" in type(cfg).model_fields} == {0.5}
    assert ops["vlstereoset_probe"].enabled and not ops["modscan_responses"].enabled
    assert not ops["counterfactual_responses"].enabled


def test_old_flag_names_keep_working_for_a_release_and_say_so(capsys):
    """--probe was renamed --family (one word per concept): the old name still selects, hidden from
    --help, with one deprecation line however often it is given; the new name says nothing."""
    from orchestration import deprecation

    deprecation._said.clear()
    args = build_parser().parse_args(["audit", "--probe", "vlstereoset", "--probe", "modscan"])
    assert args.family == ["vlstereoset", "modscan"]
    err = capsys.readouterr().err
    assert err.count("warning: --probe is deprecated") == 1 and "use --family" in err
    ops = op_run_configs(args)
    assert ops["vlstereoset_probe"].enabled and ops["modscan_responses"].enabled and not ops["t2t_completions"].enabled
    assert not ops["counterfactual_responses"].enabled
    assert build_parser().parse_args(["diff", "a", "--probe", "modscan"]).family == "modscan"
    assert build_parser().parse_args(["audit"]).family is None
    assert capsys.readouterr().err.count("deprecated") == 0  # said once per process
    with pytest.raises(SystemExit):
        build_parser().parse_args(["audit", "--probe", "nope"])
    help_text = build_parser()._subparsers._group_actions[0].choices["audit"].format_help()
    assert "--family NAME" in help_text and "--probe" not in help_text


def test_a_repetition_is_a_run_in_every_family_and_the_old_names_still_set_it(capsys):
    """--judge-repeats, --cf-seeds and --modscan-samples (and their registry options) named one
    concept three ways; they set the runs fields, each with one deprecation line."""
    from orchestration import deprecation
    from orchestration.options import family_options

    deprecation._said.clear()
    ops = _ops("--judge-repeats", "3", "--cf-seeds", "2", "--modscan-samples", "5")
    assert (ops["judge_ratings"].runs, ops["counterfactual_responses"].runs, ops["modscan_responses"].runs) == (3, 2, 5)
    err = capsys.readouterr().err
    assert [line.split(" is deprecated")[0].split()[-1] for line in err.splitlines()] == ["--judge-repeats", "--cf-seeds", "--modscan-samples"]
    new = _ops("--judge-runs", "3", "--cf-runs", "2", "--modscan-runs", "5")
    assert (new["judge_ratings"].runs, new["counterfactual_responses"].runs, new["modscan_responses"].runs) == (3, 2, 5)
    assert capsys.readouterr().err == ""
    values, given, problems = family_options(fam.get_family("modscan"), {"samples": 4})
    assert problems == [] and [v["runs"] for v in values.values()] == [4] and "deprecated" in capsys.readouterr().err
    assert family_options(fam.get_family("modscan"), {"samples": 0})[2] == ["option samples (--modscan-runs): 0 is out of range: expected 1..100000"]


def test_t2t_blocks_count_templates_and_the_old_target_flag_still_sets_them(capsys):
    """A descriptor x setting prompt is a template (a target is a registry model): --t2t-block-targets
    and its registry option set t2t_block_templates for one release, each with a deprecation line."""
    import argparse

    from orchestration import deprecation
    from orchestration.cli.parser import add_audit_arguments
    from orchestration.options import family_options

    deprecation._said.clear()
    assert _ops("--t2t-block-targets", "7")["t2t_completions"].t2t_block_templates == 7
    err = capsys.readouterr().err
    assert err.count("--t2t-block-targets is deprecated") == 1 and "use --t2t-block-templates" in err
    assert _ops("--t2t-block-templates", "9")["t2t_completions"].t2t_block_templates == 9
    assert capsys.readouterr().err == ""
    values, _, problems = family_options(fam.get_family("biasdora"), {"t2t_block_targets": 5})
    assert problems == [] and [v["t2t_block_templates"] for v in values.values()] == [5]
    assert "option 't2t_block_targets' is deprecated" in capsys.readouterr().err
    helper = argparse.ArgumentParser(prog="dora audit")
    add_audit_arguments(helper, shown="biasdora")  # what --help-family biasdora prints
    help_text = helper.format_help()
    assert "--t2t-block-templates" in help_text and "--t2t-block-targets" not in help_text


def _renamed_flags() -> list[tuple[tuple[str, ...], str, str, list[str]]]:
    """(command words, old name, new name, a value of the flag) of every old flag name any
    ``dora`` command reads (the hidden spellings that ``Flag(deprecated=)`` and the commands'
    ``add_deprecated`` declare), walked from the parser itself."""
    import argparse

    from orchestration.deprecation import DeprecatedSpelling

    found = []

    def walk(parser, words):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name))
            elif isinstance(action, DeprecatedSpelling):
                new = parser._option_string_actions[action.replacement]
                # the new flag's default (or first choice): argparse cannot tell it from "not given"
                default = new.default if not isinstance(new.default, list) else ",".join(map(str, new.default))
                value = [] if action.nargs == 0 else [str(new.choices[0] if new.choices else default)]
                found.extend((words, old, action.replacement, value) for old in action.option_strings)

    walk(build_parser(), ())
    return found


#: Arguments a command needs besides the flags (its positional argument, a required option).
_REQUIRED = {("diff",): ["some-target"], ("batch", "export"): ["--out", "exported"]}


def test_every_declared_old_flag_name_is_checked():
    """The pairs below come from the parser; every ``Flag(deprecated=)`` of every family is among them."""
    pairs = {(old, new) for words, old, new, _ in _renamed_flags() if words == ("audit",)}
    declared = {(old, f.flag) for family in fam.FAMILIES for f in family.flags for old in f.deprecated}
    assert declared and declared <= pairs, declared - pairs
    assert ("--probe", "--family") in pairs


@pytest.mark.parametrize("words,old,new,value", _renamed_flags(), ids=[f"{' '.join(c[0])}:{c[1]}" for c in _renamed_flags()])
def test_an_old_flag_name_with_its_new_name_is_one_line_exit_2(tmp_path, monkeypatch, capsys, words, old, new, value):
    """``--cf-seeds 2 --cf-runs 5`` used to let the last one win without a word (the registry
    refuses the same pair of options): refused in one line, either order, with no deprecation
    notice, before anything runs."""
    import orchestration.cli
    from orchestration import deprecation
    from orchestration.cli import main

    monkeypatch.setenv("DORA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.setattr(orchestration.cli, "call_reporting_errors", lambda handler, args: pytest.fail(f"{handler.__name__} ran"))
    deprecation._said.clear()
    required = [str(tmp_path / a) if a == "exported" else a for a in _REQUIRED.get(words, [])]
    for argv in ([old, *value, new, *value], [new, *value, old, *value]):
        with pytest.raises(SystemExit) as exit_:
            main([*words, *required, *argv])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if not line.startswith(("usage:", " "))]
        assert exit_.value.code == 2 and lines == [
            f"dora {' '.join(words)}: error: {old} and {new} given together: {old} is the old name of {new}; give {new} only"
        ], err
    assert not (tmp_path / "dagster").exists() and not (tmp_path / "home").exists()
    args = build_parser().parse_args([*words, *required, old, *value])  # alone, the old name still works
    assert capsys.readouterr().err.count(f"{old} is deprecated") == 1 and args is not None


def test_an_old_flag_name_is_recognised_as_argparse_reads_it(capsys):
    """``--flag=value`` and an abbreviation of the old name count as given (argparse reads both)."""
    for argv in (["--cf-runs=5", "--cf-seeds", "2"], ["--cf-seed", "2", "--cf-runs", "5"], ["--modscan-samples=1", "--modscan-runs=2"]):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(["audit", *argv])
        assert exit_.value.code == 2 and "is the old name of" in capsys.readouterr().err


def test_user_facing_flag_names_still_parse():
    ops = _ops(
        "--modscan-runs",
        "7",
        "--faces",
        "/f",
        "--prefix",
        "sr",
        "--modscan-no-person-check",
        "--vlstereoset-csv",
        "x.csv",
        "--images",
        "/imgs",
        "--vlstereoset-download",
        "--cf-numeric-max-new-tokens",
        "0",
        "--cf-mitigations",
        "M1",
        "--model",
        "m",
        "--backend",
        "openai",
    )
    ms, vls, cf = ops["modscan_responses"], ops["vlstereoset_probe"], ops["counterfactual_responses"]
    assert (ms.runs, ms.faces, ms.prefixes, ms.person_check) == (7, "/f", ["none", "sr"], False)
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
    proc = subprocess.run(
        [sys.executable, "-m", "orchestration.cli", "audit", *argv], capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"}
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow  # several `dora audit --help` processes: 8-10 s on 2 loaded cores
def test_help_lists_the_families_and_prints_each_default_once():
    main = _help("--help")
    assert all(f.name in main for f in fam.FAMILIES)
    assert "--modscan-runs" not in main and "--max-error-share" in main
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
    """Refused before anything starts, checked by what was not done (no Dagster or dora home,
    no model stack or dbt imported), not by CPU seconds, which a loaded machine stretches."""
    proc, imported = dora_process_imports(tmp_path, "audit", flag, value)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"dora audit: error: argument {flag}: ") and "out of range" in last, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "dagster").exists() and not (tmp_path / "home").exists()
    assert imported == [], imported


@pytest.mark.slow  # imports torch, then starts dora
def test_the_import_check_sees_a_heavy_import(tmp_path):
    """The check above can fail: the same probe names torch when the process imports it."""
    proc, imported = dora_process_imports(tmp_path, "audit", "--cf-runs", "100001", before="import torch")
    assert proc.returncode == 2 and imported == ["torch"], imported


def test_every_range_checked_flag_matches_its_field():
    """The argparse check and the Config agree: the bound itself parses and builds the Config."""
    for family in fam.FAMILIES:
        for flag in family.flags:
            if "le" in flag.bounds and flag.validator is None and not flag.repeat:
                bound = flag.bounds["le"]
                ops = _ops(flag.flag, str(bound))
                op = next(op for op, cls in family.configs.items() if cls is flag.targets[0][0])
                assert getattr(ops[op], flag.field_name) == bound


# ----------------------------------------------------------------------------- bad flags, per family
# Ten or more bad flags for each family of FAMILIES (a new family without them fails the count): each is one `dora audit: error:`
# line, exit 2, before Dagster starts (no Dagster storage, no model). Run in-process through the
# CLI's own `main` (what the `dora` script calls); the real entry point is the subprocess case below.
# `{empty}`, `{dir}`, `{fifo}`, `{file}`, `{missing}` are made in tmp_path per case.

BAD_FAMILY_FLAGS = [
    ("biasdora", ["--runs", "0"], "argument --runs: 0 is out of range"),
    ("biasdora", ["--backend", "llama"], "argument --backend: invalid choice: 'llama'"),
    ("biasdora", ["--settings", "singular,dual"], "unknown T2T setting dual"),
    ("biasdora", ["--letters", "12"], "expected lower-case letters a-z"),
    ("biasdora", ["--descriptor-source", "wiki"], "argument --descriptor-source: invalid choice: 'wiki'"),
    ("biasdora", ["--prompt-style", "poem"], "argument --prompt-style: invalid choice: 'poem'"),
    ("biasdora", ["--registry", "{missing}"], "--registry {missing}: no such file"),
    ("biasdora", ["--registry", "{dir}"], "--registry {dir}: is a folder; expected a file"),
    ("biasdora", ["--audit-id", "bad/id"], "an audit id is 1-120 of"),
    ("biasdora", ["--t2i-size", "12"], "expected <width>x<height>"),
    ("biasdora", ["--per-dimension", "-1"], "argument --per-dimension: -1 is out of range"),
    ("counterfactual", ["--cf-subsets", "race_religion"], "unknown subset race_religion"),
    ("counterfactual", ["--cf-prompts", "Describe,NoSuchPrompt"], "NoSuchPrompt"),
    ("counterfactual", ["--cf-mitigations", "M9"], "unknown mitigation M9"),
    ("counterfactual", ["--cf-runs", "0"], "argument --cf-runs: 0 is out of range"),
    ("counterfactual", ["--cf-max-new-tokens", "99999999"], "argument --cf-max-new-tokens: 99999999 is out of range"),
    ("counterfactual", ["--cf-sets-per-occupation", "-1"], "argument --cf-sets-per-occupation: -1 is out of range"),
    ("counterfactual", ["--cf-judge-backend", "claude"], "argument --cf-judge-backend: invalid choice: 'claude'"),
    ("counterfactual", ["--cf-lexicon", "{missing}"], "--cf-lexicon {missing}: no such file"),
    ("counterfactual", ["--cf-lexicon", "{dir}"], "--cf-lexicon {dir}: is a folder; expected a file"),
    ("counterfactual", ["--cf-lexicon", "{fifo}"], "--cf-lexicon {fifo}: not a regular file"),
    ("counterfactual", ["--cf-lexicon", "{empty}"], "lexicon {empty}: no word in it"),
    ("counterfactual", ["--cf-judge-model", "./no-such-judge"], "--cf-judge-model ./no-such-judge: no such file or folder"),
    ("counterfactual", ["--base-url", "ftp://127.0.0.1/v1"], "must be an http(s) URL"),
    ("counterfactual", ["--cf-images", "{missing}"], "--cf-images {missing}: no such file or folder"),
    ("counterfactual", ["--cf-images", "{dir}"], "--cf-images needs --cf-vision-model"),
    ("modscan", ["--modscan-runs", "0"], "argument --modscan-runs: 0 is out of range"),
    ("modscan", ["--modscan-backend", "llama"], "argument --modscan-backend: invalid choice: 'llama'"),
    ("modscan", ["--modscan-base-url", "localhost:8000"], "must be an http(s) URL"),
    ("modscan", ["--modscan-vision-base-url", "http://a/v1,http://a/v1"], "a server URL is repeated"),
    ("modscan", ["--modscan-probes", "modscan_text_nope"], "unknown probe modscan_text_nope"),
    ("modscan", ["--modscan-attributes", "height"], "unknown attribute height"),
    ("modscan", ["--prefix", "role_pirate"], "argument --prefix: invalid choice: 'role_pirate'"),
    ("modscan", ["--faces", "{missing}"], "--faces {missing}: no such file or folder"),
    ("modscan", ["--faces", "{fifo}"], "--faces {fifo}: not a regular file"),
    ("modscan", ["--faces", "{dir}"], "--faces needs --modscan-vision-model"),
    ("modscan", ["--modscan-t2i-backend", "openai", "--modscan-t2i-model", "dall-e-3"], "--modscan-t2i-model needs --modscan-vision-model"),
    ("modscan", ["--modscan-model", "./no-such-model"], "--modscan-model ./no-such-model: no such file or folder"),
    ("vlstereoset", ["--vlstereoset-scorers", "idm,gpt"], "unknown scorer gpt"),
    ("vlstereoset", ["--vlstereoset-mcq-shuffles", "0"], "argument --vlstereoset-mcq-shuffles: 0 is out of range"),
    ("vlstereoset", ["--vlstereoset-items", "some"], "argument --vlstereoset-items: invalid choice: 'some'"),
    ("vlstereoset", ["--vlstereoset-item-seed", "-1"], "argument --vlstereoset-item-seed: -1 is out of range"),
    ("vlstereoset", ["--vlstereoset-vlm-backend", "anthropic"], "argument --vlstereoset-vlm-backend: invalid choice"),
    ("vlstereoset", ["--vlstereoset-vlm-base-url", "file:///etc/passwd"], "must be an http(s) URL"),
    ("vlstereoset", ["--vlstereoset-csv", "{missing}"], "--vlstereoset-csv {missing}: no such file"),
    ("vlstereoset", ["--vlstereoset-csv", "{dir}"], "--vlstereoset-csv {dir}: is a folder; expected a file"),
    ("vlstereoset", ["--vlstereoset-csv", "{fifo}"], "--vlstereoset-csv {fifo}: not a regular file"),
    ("vlstereoset", ["--images", "{file}"], "--images {file}: is a file; expected a folder"),
    ("vlstereoset", ["--vlstereoset-images", "{missing}"], "--images {missing}: no such folder"),
    ("vlstereoset", ["--vlstereoset-scorers", "idm,clip"], "the clip scorer needs --vlstereoset-clip-model"),
    ("vlstereoset", ["--vlstereoset-clip-model", "{missing}"], "--vlstereoset-clip-model {missing}: no such file or folder"),
]


def _paths(tmp_path) -> dict[str, str]:
    (tmp_path / "dir").mkdir()
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "file.csv").write_text("a,b\n1,2\n")
    os.mkfifo(tmp_path / "fifo")  # opening it to read would block: it must be refused unopened
    return {
        "missing": str(tmp_path / "missing.csv"),
        "dir": str(tmp_path / "dir"),
        "empty": str(tmp_path / "empty.txt"),
        "file": str(tmp_path / "file.csv"),
        "fifo": str(tmp_path / "fifo"),
    }


def test_every_family_has_ten_bad_flag_cases():
    """Read from FAMILIES: a family added without its bad-flag cases fails here instead of being
    skipped."""
    from collections import Counter

    counts = Counter(family for family, _, _ in BAD_FAMILY_FLAGS)
    assert set(counts) == set(fam.family_names()) and min(counts[f] for f in fam.family_names()) >= 10, counts


@pytest.mark.parametrize("family,argv,message", BAD_FAMILY_FLAGS, ids=[f"{c[0]}-{c[1][0].lstrip('-')}-{i}" for i, c in enumerate(BAD_FAMILY_FLAGS)])
def test_bad_family_flag_is_one_line_exit_2_before_dagster(tmp_path, monkeypatch, capsys, family, argv, message):
    from orchestration.cli import main

    paths = _paths(tmp_path)
    monkeypatch.setenv("DORA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    argv = [a.format(**paths) for a in argv]
    from models_inference.backends.text import TransformersBackend
    from orchestration import instance

    started = []  # what a refused flag must not start: a model load, the Dagster instance
    monkeypatch.setattr(TransformersBackend, "load", classmethod(lambda cls, *a, **k: started.append("model")))
    monkeypatch.setattr(instance, "open_instance", lambda *a, **k: started.append("instance"))
    with pytest.raises(SystemExit) as exit_:
        main(["audit", "--family", family, *argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith(("usage:", " "))]
    assert exit_.value.code == 2 and len(lines) == 1, err
    assert lines[0].startswith("dora audit: error: ") and message.format(**paths) in lines[0], err
    assert not (tmp_path / "dagster").exists() and not (tmp_path / "home").exists() and started == []


@pytest.mark.parametrize(
    "argv",
    [["--family", "vlstereoset", "--vlstereoset-csv", "{dir}"], ["--family", "modscan", "--faces", "{fifo}"]],
    ids=["csv-is-a-folder", "faces-is-a-fifo"],
)
def test_bad_input_path_through_the_real_entry_point(tmp_path, argv):
    paths = _paths(tmp_path)
    env = {**os.environ, "DORA_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster")}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestration.cli", "audit", *[a.format(**paths) for a in argv]], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"dora audit: error: {argv[-2]} ") and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "dagster").exists()

"""``dora audit --help`` shows the flags several families share (orchestration/cli/flags.py:
``shared_family_flags``): ``--model``, ``--backend``, ``--base-url`` and ``--batch-size`` set
BiasDora's and the counterfactual family's fields, so they show in the plain help and under
``--help-family`` of either family, not under a family that does not use them."""

from __future__ import annotations

import pytest

from orchestration.cli.flags import shared_family_flags
from orchestration.cli.parser import build_parser

SHARED = ["--model", "--backend", "--base-url", "--batch-size"]
TITLE = "flags of biasdora, counterfactual (one value sets each of these families' field):"


def _help(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 0
    return capsys.readouterr().out


def _shown(text: str, flag: str) -> bool:
    return any(line.lstrip().startswith(f"{flag} ") for line in text.splitlines() if line.startswith("  "))


def test_the_shared_flags_are_those_two_families_declare():
    assert {families: [f.flag for f in flags] for families, flags in shared_family_flags().items()} == {("biasdora", "counterfactual"): SHARED}


@pytest.mark.parametrize(
    "argv,shown",
    [
        (["audit", "--help"], True),
        (["audit", "--help-family", "counterfactual"], True),
        (["audit", "--help-family", "biasdora"], True),
        (["audit", "--help-family", "modscan"], False),
    ],
)
def test_shared_flags_show_where_they_are_used(capsys, argv, shown):
    text = _help(capsys, argv)
    assert (TITLE in text) is shown
    assert [f for f in SHARED if _shown(text, f)] == (SHARED if shown else [])
    # a family's own flag stays under its own --help-family
    assert _shown(text, "--cf-subsets") is (argv[-1] == "counterfactual")


def test_a_shared_flag_sets_both_families_fields():
    from orchestration.cli.flags import config_values
    from orchestration.defs.biasdora.config import AuditConfig
    from orchestration.defs.counterfactual.config import CounterfactualConfig

    args = build_parser().parse_args(["audit", "--model", "tiny-model", "--batch-size", "7"])
    values = config_values(args)
    assert values[AuditConfig]["model"] == values[CounterfactualConfig]["model"] == "tiny-model"
    assert values[AuditConfig]["batch_size"] == values[CounterfactualConfig]["batch_size"] == 7

"""``dora audit`` flags of the ModSCAN family -> the asset's run config (orchestration/defs/modscan/config.py)."""

import pytest

from orchestration.cli.flags import op_run_configs
from orchestration.cli.parser import build_parser as _build_parser
from orchestration.defs.modscan.config import ModscanConfig


def _config(*flags: str) -> dict:
    return op_run_configs(_build_parser().parse_args(["audit", *flags]))["modscan_responses"].model_dump()


def test_default_audit_runs_the_small_text_analogue_sample():
    cfg = _config()
    assert cfg["enabled"] and cfg["prefixes"] == ["none"]
    assert ModscanConfig(**cfg).runs == 1 and cfg["instances_per_scenario"] == 5
    assert cfg["probes"] == ["modscan_text_persona", "modscan_text_faces"]


def test_probe_selection_and_prefixes():
    assert _config("--family", "modscan")["enabled"]
    assert not _config("--family", "biasdora")["enabled"]
    assert _config("--family", "biasdora", "--family", "modscan")["enabled"]
    cfg = _config("--prefix", "sr", "--prefix", "role_sexist", "--modscan-runs", "200", "--modscan-instances", "0")
    assert cfg["prefixes"] == ["none", "sr", "role_sexist"] and cfg["runs"] == 200 and cfg["instances_per_scenario"] == 0
    ModscanConfig(**cfg)  # a valid Dagster config
    with pytest.raises(SystemExit):
        _build_parser().parse_args(["audit", "--prefix", "be nice"])

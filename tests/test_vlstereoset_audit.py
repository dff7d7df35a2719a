"""``dora audit --family vlstereoset`` end to end: a VLStereoSet-format CSV with an image folder,
the embedded SmolLM2 (text-only analogue), a tiny random CLIP built from a config, the reference
IDM, the real Dagster job and dbt build; then ``dora query``, ``dora report`` and ``dora diff
--family vlstereoset`` on the marts it built."""

from __future__ import annotations

import csv
import io
import os
import sys
from pathlib import Path

import duckdb
import pytest

from models_inference.probes.vlstereoset.dataset import synthetic_csv_path
from tests.helpers.openai_server import tiny_png
from tests.helpers.tiny_models import build_tiny_clip


def mini_csv(tmp_path: Path, rows: int = 8) -> Path:
    """The first ``rows`` rows of the synthetic file, same format (BOM, trailing column)."""
    lines = synthetic_csv_path().read_text(encoding="utf-8-sig").splitlines()[: rows + 1]
    path = tmp_path / "VLStereoSet_mini.csv"
    path.write_bytes(b"\xef\xbb\xbf" + ("\r\n".join(lines) + "\r\n").encode())
    return path


@pytest.mark.slow
def test_dora_audit_probe_vlstereoset_end_to_end(dora_home, tmp_path, monkeypatch, capsys):
    from orchestration.cli import main

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # the dbt executable
    csv_path = mini_csv(tmp_path)
    images = tmp_path / "imgs"
    images.mkdir()
    for row in range(1, 8):  # row 8 has no image
        (images / f"{row}.png").write_bytes(tiny_png((30 * row, 100, 250 - 30 * row), (16, 16)))
    clip = build_tiny_clip(tmp_path)
    base = [
        "audit",
        "--family",
        "vlstereoset",
        "--vlstereoset-csv",
        str(csv_path),
        "--images",
        str(images),
        "--vlstereoset-clip-model",
        str(clip),
        "--vlstereoset-scorers",
        "idm,vlstereo_text_caption_prior",
        "--no-progress",
    ]
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "VLStereoSet (vlrs" in out and "vlstereo_text_caption_prior:mean" in out and "clip:cosine" in out

    warehouse = dora_home / "warehouse.duckdb"
    with duckdb.connect(str(warehouse), read_only=True) as con:
        metrics = {
            (r[0], r[1]): r[2:]
            for r in con.execute("select scorer_variant, category, n_items, n_unscored, vlrs, vlbs, ivlas from agg_vlstereoset_metrics").fetchall()
        }
        images_status = dict(con.execute("select image_status, count(*) from stg_vlstereoset_items group by all").fetchall())
        t2t = con.execute("select count(*) from information_schema.tables where table_name = 'fct_associations'").fetchone()[0]
        scores = con.execute("select count(*), count(distinct audit_id) from fct_vlstereoset_scores").fetchone()
    assert images_status == {"ok": 7, "missing": 1}
    assert metrics[("idm", "all")] == (8, 0, 100.0, 0.0, 100.0)
    assert metrics[("clip:cosine", "all")][:2] == (7, 1)  # the item without an image is unscored, not dropped
    assert metrics[("vlstereo_text_caption_prior:sum", "all")][:2] == (8, 0)
    assert {c for (_, c) in metrics} == {"all", "gender", "profession"}
    assert scores[1] == 3 and t2t == 0  # only the vlstereoset family ran (--family)

    # a second version of the same model: CLIP with its logit scale (a new audit); the others are complete
    assert main([*base, "--vlstereoset-clip-logit-scale"]) == 0
    # and a real second version of the CLIP folder: only its logit scale moves, which the cosine
    # scorer ignores (a new model version and audit of clip:cosine with the same argmax)
    from transformers import CLIPModel

    model = CLIPModel.from_pretrained(clip)
    model.logit_scale.data += 1.0
    model.save_pretrained(clip)
    assert main(base) == 0
    capsys.readouterr()
    # default pair: the latest audit (clip:cosine, new version) and the previous one sharing its
    # scorer variant (clip:cosine, first version), not the logit-scale audit in between
    assert main(["diff", str(clip), "--family", "vlstereoset", "--format", "csv"]) == 0
    diff = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    # same argmax (the scale is a positive factor): vlrs and vlbs unchanged, per category and overall
    assert {d["category"] for d in diff} == {"all", "gender", "profession"}
    assert {d["metric"] for d in diff} == {"vlrs", "vlbs"} and {d["scorer_variant"] for d in diff} == {"clip:cosine"}
    assert all(d["change_type"] == "unchanged" and d["is_significant_change"] == "False" for d in diff)
    assert all(d["value_before"] == d["value_after"] and d["k_before"] == d["k_after"] for d in diff)
    assert any(d["change_p"] for d in diff) and all(float(d["change_p"]) == 1.0 for d in diff if d["change_p"])

    assert main(["report"]) == 0
    page = (dora_home / "reports" / "all" / "vlstereoset.html").read_text()
    assert "Table 3 view" in page and "Table 4 view" in page and "clip:logit_scale" in page
    assert main(["query", "select count(*) as n from fct_vlstereoset_shifts", "--format", "csv"]) == 0


def test_cli_flags_and_config():
    import pytest

    from orchestration.cli.flags import op_run_configs
    from orchestration.cli.parser import build_parser as _build_parser
    from orchestration.defs.vlstereoset.config import VLStereoSetConfig, selected_scorers

    def run_config(args):
        return op_run_configs(args)["vlstereoset_probe"].model_dump()

    args = _build_parser().parse_args(
        ["audit", "--family", "biasdora", "--images", "/x", "--vlstereoset-vlm-model", "m", "--vlstereoset-vlm-backend", "openai"]
    )
    cfg = run_config(args)
    assert cfg["enabled"] is False and cfg["images"] == "/x" and cfg["vlm_backend"] == "openai"
    cfg = VLStereoSetConfig(**run_config(_build_parser().parse_args(["audit"])))
    assert cfg.enabled and cfg.csv is None and selected_scorers(cfg) == ["vlstereo_text_caption_prior", "idm", "bim", "ram"]
    assert selected_scorers(VLStereoSetConfig(vlm_model="m", vlm_backend="openai", scorers=[])) == ["mcq"]
    assert selected_scorers(VLStereoSetConfig(vlm_model="m", scorers=["idm"], clip_model="c")) == ["idm", "clip", "loglik", "mcq"]
    with pytest.raises(ValueError, match="unknown VLStereoSet scorer"):
        selected_scorers(VLStereoSetConfig(scorers=["vqa"]))
    with pytest.raises(ValueError, match="needs --vlstereoset-clip-model"):
        selected_scorers(VLStereoSetConfig(scorers=["clip"]))
    args = _build_parser().parse_args(["audit", "--vlstereoset-text-backend", "openai", "--vlstereoset-text-base-url", "http://h:1/v1"])
    assert (run_config(args)["text_backend"], run_config(args)["text_base_url"]) == ("openai", "http://h:1/v1")
    with pytest.raises(SystemExit):  # a backend outside the vocabulary is an argparse error
        _build_parser().parse_args(["audit", "--vlstereoset-text-backend", "vllm"])

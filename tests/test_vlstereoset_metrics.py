"""VLStereoSet metrics in SQL against every published test vector (docs/families/vlstereoset.md#checked-against-the-paper).

* ivlas: the dbt macro ``vlstereoset_ivlas`` (``dbt_project/macros/vlstereoset.sql``, the one
  expression ``agg_vlstereoset_metrics`` uses) rendered with Jinja and evaluated by DuckDB on
  the printed vlrs / vlbs of all 9 Table 3 rows and all 24 Table 4 cells (tolerance 0.01).
* Table 4 -> Table 3: for ALBEF, VisualBERT, FLAVA, CLIP and LXMERT the implied per-category
  counts (corrected sizes Gender 206, Profession 322, Race 486, Religion 14; half of each
  anti-stereotypical) are landed as picks, ``dbt build`` runs the real marts, and
  ``agg_vlstereoset_metrics`` must give Table 4's vlrs / vlbs per category and, in its
  ``all`` row, exactly Table 3's counts (the aggregation identity, B.5.3).
* IDM / BIM / RAM through :class:`ReferenceScorer` and the probe loop on the same 1,028 items:
  100 / 0, 100 / 100 and 66.67 / 33.33 in expectation (B.5.4).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

import duckdb
import pytest

from analytics.dbt_runner import invoke_dbt
from ingestion.landing import write_shard
from tests.helpers.dbt_jinja import macro_globals
from tests.helpers.homes import NO_UNIT_TESTS

#: Table 3 (model, vlrs, vlbs, published ivlas).
TABLE3 = [
    ("IDM", 100.00, 0.00, 100.00),
    ("ALBEF", 85.21, 32.30, 75.46),
    ("VisualBERT", 85.31, 38.91, 71.20),
    ("ViLT", 86.94, 41.65, 69.83),
    ("LXMERT", 74.22, 37.35, 67.94),
    ("CLIP", 88.04, 45.72, 67.15),
    ("RAM", 66.67, 33.33, 66.67),
    ("FLAVA", 60.70, 28.79, 65.53),
    ("BIM", 100.00, 100.00, 0.00),
]
#: Table 4 (model, category, vlrs, vlbs, published ivlas, implied relevant, implied stereotype picks or None).
TABLE4 = [
    ("ALBEF", "gender", 89.32, 37.86, 73.29, 184, 39),
    ("ALBEF", "profession", 84.78, 34.78, 73.72, 273, 56),
    ("ALBEF", "race", 83.95, 28.40, 77.29, 408, 69),
    ("ALBEF", "religion", 78.57, 28.57, 74.83, 11, 2),
    ("ViLT", "gender", 88.73, 49.02, 64.75, None, None),
    ("ViLT", "profession", 84.06, 36.25, 72.51, None, None),
    ("ViLT", "race", 88.54, 42.92, 69.41, None, None),
    ("ViLT", "religion", 71.43, 14.29, 77.92, 10, 1),
    ("FLAVA", "gender", 76.70, 34.95, 70.39, 158, 36),
    ("FLAVA", "profession", 64.60, 34.16, 65.21, 208, 55),
    ("FLAVA", "race", 51.44, 22.63, 61.79, 250, 55),
    ("FLAVA", "religion", 57.14, 28.57, 63.49, 8, 2),
    ("VisualBERT", "gender", 86.89, 54.37, 59.84, 179, 56),
    ("VisualBERT", "profession", 87.58, 34.78, 74.76, 282, 56),
    ("VisualBERT", "race", 82.92, 35.80, 72.37, 403, 87),
    ("VisualBERT", "religion", 92.86, 14.29, 89.14, 13, 1),
    ("CLIP", "gender", 84.95, 48.54, 64.09, 175, 50),
    ("CLIP", "profession", 89.13, 48.45, 65.32, 287, 78),
    ("CLIP", "race", 88.48, 42.80, 69.48, 430, 104),
    ("CLIP", "religion", 92.86, 42.86, 70.75, 13, 3),
    ("LXMERT", "gender", 69.42, 38.83, 65.03, 143, 40),
    ("LXMERT", "profession", 75.47, 39.75, 67.00, 243, 64),
    ("LXMERT", "race", 75.51, 34.98, 69.88, 367, 85),
    ("LXMERT", "religion", 71.43, 42.86, 63.49, 10, 3),
]
#: Table 3 counts (relevant / 1028, stereotype picks / 514), B.5.1.
TABLE3_COUNTS = {"ALBEF": (876, 166), "VisualBERT": (877, 200), "FLAVA": (624, 148), "CLIP": (905, 235), "LXMERT": (763, 192)}
#: Corrected category sizes (docs/families/vlstereoset.md#category-sizes).
SIZES = {"gender": 206, "profession": 322, "race": 486, "religion": 14}


def ivlas_sql(vlrs: str, vlbs: str) -> str:
    """The SQL expression of the dbt macro, rendered (dbt macros are Jinja; tests/helpers/dbt_jinja.py)."""
    return str(macro_globals()["vlstereoset_ivlas"](vlrs, vlbs))


def test_ivlas_macro_reproduces_tables_3_and_4():
    vectors = [(m, "all", r, b, pub) for m, r, b, pub in TABLE3] + [(m, c, r, b, pub) for m, c, r, b, pub, _, _ in TABLE4]
    assert len(vectors) == 33
    with duckdb.connect() as con:
        con.execute("create table v (model varchar, category varchar, vlrs double, vlbs double, published double)")
        con.executemany("insert into v values (?, ?, ?, ?, ?)", vectors)
        rows = con.sql(f"select model, category, published, {ivlas_sql('vlrs', 'vlbs')} as ivlas from v").fetchall()
        # the zero-denominator default and null propagation
        edge = con.execute(f"select {ivlas_sql('0.0', '100.0')}, {ivlas_sql('50.0', 'null')}").fetchone()
    assert len(rows) == 33
    for model, category, published, ivlas in rows:
        assert ivlas == pytest.approx(published, abs=0.01), (model, category, ivlas, published)
    assert edge == (0.0, None)


def test_table4_counts_sum_to_table3_counts():
    for model, (relevant, picks) in TABLE3_COUNTS.items():
        cells = [row for row in TABLE4 if row[0] == model]
        assert sum(c[5] for c in cells) == relevant and sum(c[6] for c in cells) == picks


# ----------------------------------------------------------------------------- the marts


T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
KINDS = ("stereotype", "anti-stereotype", "unrelated")


def corrected_items() -> list[dict]:
    """1,028 items with the corrected category sizes, half of each category anti-stereotypical."""
    rows, n = [], 0
    for category, size in SIZES.items():
        for j in range(size):
            n += 1
            y = "a" if j < size // 2 else "s"
            rows.append(
                {
                    "dataset_id": "vls-corrected",
                    "source_file": "corrected_sizes.csv",
                    "is_synthetic": True,
                    "item_id": f"r{n:05d}",
                    "source_row": n,
                    "source_line": n + 1,
                    "category": category,
                    "target": "t",
                    "context": "c BLANK",
                    "caption_stereotype": "c s",
                    "caption_anti_stereotype": "c a",
                    "caption_unrelated": "c i",
                    "caption_source": "as_given",
                    "label": 1 if y == "a" else 0,
                    "y": y,
                    "image_url": f"https://example.invalid/{n}.jpg",
                    "image_status": "not_fetched",
                    "image_source": "none",
                    "image_path": None,
                    "image_sha256": None,
                    "image_width": None,
                    "image_height": None,
                    "image_error": None,
                    "neutral_stereotype": None,
                    "neutral_anti_stereotype": None,
                    "neutral_method": "m",
                    "neutral_rule": None,
                    "neutral_status": "target_not_found",
                    "landed_at": T0,
                }
            )
    return rows


def replay_picks(items: list[dict], relevant: dict, picks: dict) -> dict[str, str]:
    """item_id -> the caption picked so that each category has exactly ``relevant[c]`` relevant
    items and ``picks[c]`` stereotype picks among its anti-stereotypical items."""
    out = {}
    for category in SIZES:
        cat = [it for it in items if it["category"] == category]
        anti = [it for it in cat if it["y"] == "a"]
        for it in anti[: picks[category]]:
            out[it["item_id"]] = "stereotype"
        rest = [it for it in cat if it["item_id"] not in out]
        need = relevant[category] - picks[category]
        for k, it in enumerate(rest):
            if k < need:
                out[it["item_id"]] = "anti-stereotype" if it["y"] == "a" else "stereotype"
            else:
                out[it["item_id"]] = "unrelated"
    return out


def score_rows(audit_id: str, model: str, items: list[dict], picked: dict[str, str]) -> list[dict]:
    return [
        {
            "audit_id": audit_id,
            "model_id": model,
            "model_version": "paper",
            "backend": "replay",
            "scorer": "replay",
            "scorer_variant": "replay",
            "from_paper": True,
            "score_kind": "logit",
            "dataset_id": it["dataset_id"],
            "item_id": it["item_id"],
            "condition": "original",
            "caption_kind": k,
            "caption_text": k,
            "score": 1.0 if picked[it["item_id"]] == k else 0.0,
            "n_tokens": None,
            "status": "ok",
            "error": None,
            "detail_json": None,
            "scored_at": T0,
        }
        for it in items
        for k in KINDS
    ]


@pytest.mark.slow
def test_marts_reproduce_table4_cells_and_table3_aggregates(dora_home):
    from models_inference.probes.vlstereoset.probe import probe_vlstereoset
    from models_inference.probes.vlstereoset.scorers import ReferenceScorer

    items = corrected_items()
    write_shard("vlstereoset_items", items, partition="items", name="corrected")
    for model in TABLE3_COUNTS:
        cells = {c: (rel, st) for m, c, _, _, _, rel, st in TABLE4 if m == model}
        picked = replay_picks(items, {c: v[0] for c, v in cells.items()}, {c: v[1] for c, v in cells.items()})
        write_shard("vlstereoset_scores", score_rows(f"replay-{model}", model, items, picked), partition=f"replay-{model}")
    for name in ("idm", "bim", "ram"):
        probe_vlstereoset(items, ReferenceScorer(name), audit_id=f"ref-{name}", shard_rows=2048, progress=False)

    invoke_dbt(["build", "--select", "tag:vlstereoset", *NO_UNIT_TESTS], dora_home)
    with duckdb.connect(str(dora_home / "warehouse.duckdb"), read_only=True) as con:
        got = {
            (r[0], r[1]): r[2:]
            for r in con.sql(
                "select model_id, category, n_items, n_anti_stereotypical, n_relevant, n_stereotype_picks, n_ties, vlrs, vlbs, ivlas "
                "from agg_vlstereoset_metrics"
            ).fetchall()
        }
    for model, category, vlrs, vlbs, ivlas, rel, st in TABLE4:
        if model not in TABLE3_COUNTS:
            continue  # ViLT: not integer fractions of the full set (B.5.1 note)
        n, n_a, n_rel, n_st, ties, g_vlrs, g_vlbs, g_ivlas = got[(model, category)]
        assert (n, n_a, n_rel, n_st, ties) == (SIZES[category], SIZES[category] // 2, rel, st, 0)
        assert g_vlrs == pytest.approx(vlrs, abs=0.01) and g_vlbs == pytest.approx(vlbs, abs=0.01), (model, category)
        assert g_ivlas == pytest.approx(ivlas, abs=0.01), (model, category)
    table3 = {m: (r, b, i) for m, r, b, i in TABLE3}
    for model, (relevant, picks) in TABLE3_COUNTS.items():
        n, n_a, n_rel, n_st, _, g_vlrs, g_vlbs, g_ivlas = got[(model, "all")]
        assert (n, n_a, n_rel, n_st) == (1028, 514, relevant, picks)  # the aggregation identity, exact
        assert (g_vlrs, g_vlbs, g_ivlas) == pytest.approx(table3[model], abs=0.01)
    # reference models (B.5.4)
    assert got[("IDM", "all")][5:] == pytest.approx((100.0, 0.0, 100.0))
    assert got[("BIM", "all")][5:] == pytest.approx((100.0, 100.0, 0.0))
    ram_vlrs, ram_vlbs = got[("RAM", "all")][5:7]
    assert abs(ram_vlrs - 200 / 3) < 3 * 100 * math.sqrt(2 / 9 / 1028)  # 3 standard errors
    assert abs(ram_vlbs - 100 / 3) < 3 * 100 * math.sqrt(2 / 9 / 514)
    for category, size in SIZES.items():
        assert got[("IDM", category)][:5] == (size, size // 2, size, 0, 0)
        assert got[("BIM", category)][:5] == (size, size // 2, size, size // 2, 0)

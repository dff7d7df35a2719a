"""VLStereoSet views for the CLI: the ``dora audit`` summary, the ``dora report`` page (Table 3 / 4
shape, lmss / vlss histograms) and ``dora diff`` on ivlas (VLStereoSet §4, Tables 3-4, Figure 4).

Every number comes from the public relations ``agg_vlstereoset_metrics``,
``fct_vlstereoset_shifts`` and ``dim_audits``-free ``fct_vlstereoset_scores`` (read-only SQL,
values passed as ``?`` parameters); this module only lays them out.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from pathlib import Path

from analytics.query import QueryResult, connect_read_only, format_result

CATEGORIES = ("gender", "profession", "race", "religion")
SYNTHETIC_NOTE = (
    "dataset is dora's SYNTHETIC file (22 made-up statements): the numbers show the pipeline working, "
    "not a model's bias on VLStereoSet; pass --vlstereoset-csv with the released CSV"
)


def _query(sql: str, params: list | None = None) -> QueryResult:
    con = connect_read_only()
    try:
        cur = con.execute(sql, params or [])
        cols = [d[0] for d in cur.description] if cur.description else []
        return QueryResult(cols, cur.fetchall() if cols else [])
    finally:
        con.close()


def _rows(result: QueryResult) -> list[dict]:
    return [dict(zip(result.columns, r, strict=True)) for r in result.rows]


def metrics(audit_ids: list[str] | None = None, category: str | None = None) -> list[dict]:
    """Rows of ``agg_vlstereoset_metrics`` (optionally of some audits / one category), rounded to 2 decimals.

    Raises:
        LookupError: the VLStereoSet marts are not built. WarehouseMissingError / WarehouseBusyError.
    """
    import duckdb

    where, params = [], []
    if audit_ids:
        where.append(f"audit_id in ({', '.join('?' for _ in audit_ids)})")
        params += audit_ids
    if category:
        where.append("category = ?")
        params.append(category)
    sql = (
        "select audit_id, model_id, model_version, scorer_variant, from_paper, is_synthetic, category, n_items, "
        "n_anti_stereotypical, n_ties, n_unscored, round(vlrs, 2) as vlrs, round(vlbs, 2) as vlbs, round(ivlas, 2) as ivlas "
        "from agg_vlstereoset_metrics"
        + (" where " + " and ".join(where) if where else "")
        + " order by ivlas desc nulls last, audit_id, scorer_variant, category"
    )
    try:
        return _rows(_query(sql, params))
    except duckdb.CatalogException as exc:
        raise LookupError(f"the VLStereoSet marts are not built yet ({exc}); run `dora audit --family vlstereoset`") from None


def vlstereoset_summary(audit_ids: list[str]) -> str:
    """The lines ``dora audit`` prints for the VLStereoSet audits of a run (Table 3 shape)."""
    rows = metrics(audit_ids, "all")
    lines = [
        "",
        "VLStereoSet (vlrs: relevance, ideal 100; vlbs: stereotype picks on anti-stereotypical images, "
        "unbiased 0; ivlas: their harmonic combination, ideal 100):",
    ]
    cols = ["model_id", "scorer_variant", "n_items", "n_ties", "n_unscored", "vlrs", "vlbs", "ivlas"]
    lines += ["  " + ln for ln in format_result(QueryResult(cols, [tuple(r[c] for c in cols) for r in rows])).splitlines()]
    if any(r["is_synthetic"] for r in rows):
        lines.append("  note: " + SYNTHETIC_NOTE)
    lines += [
        '  per category (Table 4): dora query "select * from agg_vlstereoset_metrics order by audit_id, scorer_variant, category"',
        '  lmss / vlss: dora query "select * from fct_vlstereoset_shifts"',
    ]
    return "\n".join(lines)


def _histogram_png(shifts: list[dict], path: Path) -> Path | None:
    """Histograms of lmss and vlss per (model, scorer variant) (Figure 4's view)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r["model_id"], r["scorer_variant"]) for r in shifts})
    if not groups:
        return None
    fig, axes = plt.subplots(len(groups), 2, figsize=(9, 2.4 * len(groups)), squeeze=False, layout="constrained")
    for (model, variant), row in zip(groups, axes, strict=True):
        for ax, col in zip(row, ("lmss", "vlss"), strict=True):
            values = [r[col] for r in shifts if (r["model_id"], r["scorer_variant"]) == (model, variant) and r[col] is not None]
            if values:
                ax.hist(values, bins=min(20, max(3, len(values))), color="#4575b4")
                ax.axvline(0, color="black", lw=0.8)
                share = 100 * sum(v > 0 for v in values) / len(values)
                ax.set_title(f"{col}: {model.split('/')[-1]} [{variant}] n={len(values)}, {share:.0f}% > 0", fontsize=8)
            else:
                ax.set_title(f"{col}: {model.split('/')[-1]} [{variant}]: none", fontsize=8)
                ax.set_axis_off()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _table(rows: list[dict], cols: list[str]) -> str:
    if not rows:
        return "<p class='empty'>nothing to show</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('n/a' if r.get(c) is None else str(r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_vlstereoset_report(out_dir: Path, audit_id: str | None = None) -> Path:
    """Write ``vlstereoset.html`` (+ ``vlstereoset_shifts.png``) into ``out_dir``: the Table 3 view
    (one row per audit and scorer variant, category 'all'), the Table 4 view (ivlas / vlrs /
    vlbs per category) and the lmss / vlss histograms of the analysis subset.

    Returns:
        The page's path.

    Raises:
        ReportPageSkipped: the VLStereoSet marts are not built, or they hold no audit (of
            ``audit_id``, when given): a page of empty tables would say nothing.
    """
    from ingestion.errors import ReportPageSkipped

    try:
        all_rows = metrics([audit_id] if audit_id else None)
    except LookupError as exc:
        raise ReportPageSkipped(str(exc)) from None
    if not all_rows:
        raise ReportPageSkipped(f"no VLStereoSet audit{' ' + audit_id if audit_id else ''} in the warehouse (agg_vlstereoset_metrics has no row)")
    out_dir.mkdir(parents=True, exist_ok=True)
    table3 = [r for r in all_rows if r["category"] == "all"]
    table4 = []
    for r in table3:
        row = {"model_id": r["model_id"], "scorer_variant": r["scorer_variant"]}
        for c in CATEGORIES:
            cell = next(
                (x for x in all_rows if x["audit_id"] == r["audit_id"] and x["scorer_variant"] == r["scorer_variant"] and x["category"] == c), None
            )
            row[c] = "n/a" if cell is None else " / ".join("n/a" if cell[m] is None else str(cell[m]) for m in ("vlrs", "vlbs", "ivlas"))
        table4.append(row)
    params = [audit_id] if audit_id else []
    shifts = _rows(
        _query(
            "select model_id, scorer_variant, item_id, lmss, vlss from fct_vlstereoset_shifts" + (" where audit_id = ?" if audit_id else ""), params
        )
    )
    png = _histogram_png(shifts, out_dir / "vlstereoset_shifts.png")
    synthetic = any(r["is_synthetic"] for r in table3)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>dora report - VLStereoSet</title>
<style>body {{ font-family: sans-serif; margin: 2em; }} table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ddd; padding: 3px 7px; }} th {{ background: #f3f3f3; }} .note {{ color: #666; }}</style></head><body>
<h1>VLStereoSet: caption selection on (anti-)stereotypical images</h1>
<p class="note">Generated {now} from agg_vlstereoset_metrics and fct_vlstereoset_shifts. vlrs: % of items whose selected caption
is the stereotypical or anti-stereotypical one (ideal 100); vlbs: % of anti-stereotypical images captioned with the
stereotypical statement (unbiased 0); ivlas = 2 vlrs (100 - vlbs) / (vlrs + 100 - vlbs) (ideal 100). Scorer variants not from
the paper (loglik, mcq, vlstereo_text_caption_prior) are dora's adaptations; the text-only analogue sees no image.
{"<br><b>" + html.escape(SYNTHETIC_NOTE) + "</b>" if synthetic else ""}</p>
<h2>Table 3 view (all categories)</h2>
{_table(table3, ["model_id", "scorer_variant", "from_paper", "n_items", "n_ties", "n_unscored", "vlrs", "vlbs", "ivlas"])}
<h2>Table 4 view (vlrs / vlbs / ivlas per category)</h2>
{_table(table4, ["model_id", "scorer_variant", *CATEGORIES])}
<h2>lmss and vlss (gender, anti-stereotypical images where the model picked the stereotypical caption)</h2>
{f"<p><img src='{png.name}' alt='lmss and vlss histograms'></p>" if png else "<p class='empty'>no item in the analysis subset</p>"}
</body></html>
"""
    path = out_dir / "vlstereoset.html"
    path.write_text(page, encoding="utf-8")
    return path


def ivlas_diff(model_or_target: str, from_ref: str | None = None, to_ref: str | None = None) -> QueryResult:
    """ivlas / vlrs / vlbs per category and scorer variant of two audits of one model (``dora diff`` on VLStereoSet).

    The audits are the model's VLStereoSet audits (``agg_vlstereoset_metrics``) matched by audit id
    or model version; defaults: the latest and the one before it (by first score landed).

    Raises:
        LookupError: fewer than two audits, or a reference that matches none.
    """
    audits = _rows(
        _query(
            "select audit_id, model_version, min(scored_at) as first_scored from fct_vlstereoset_scores "
            "where model_id = ? or model_id like '%/' || ? group by audit_id, model_version order by first_scored",
            [model_or_target, model_or_target],
        )
    )

    def pick(ref):
        found = [a for a in audits if ref in (a["audit_id"], a["model_version"])]
        if not found:
            raise LookupError(f"no VLStereoSet audit of {model_or_target!r} matches {ref!r}")
        return found[-1]["audit_id"]

    if len(audits) < 2 and not (from_ref and to_ref):
        raise LookupError(f"{model_or_target!r} has {len(audits)} VLStereoSet audit(s); a diff needs two")
    to_id = pick(to_ref) if to_ref else audits[-1]["audit_id"]
    from_id = pick(from_ref) if from_ref else [a["audit_id"] for a in audits if a["audit_id"] != to_id][-1]
    return _query(
        "select coalesce(t.scorer_variant, f.scorer_variant) as scorer_variant, coalesce(t.category, f.category) as category, "
        "round(f.ivlas, 2) as ivlas_from, round(t.ivlas, 2) as ivlas_to, round(t.ivlas - f.ivlas, 2) as ivlas_change, "
        "round(t.vlrs - f.vlrs, 2) as vlrs_change, round(t.vlbs - f.vlbs, 2) as vlbs_change "
        "from (select * from agg_vlstereoset_metrics where audit_id = ?) as f "
        "full join (select * from agg_vlstereoset_metrics where audit_id = ?) as t "
        "on f.scorer_variant = t.scorer_variant and f.category = t.category order by 1, 2",
        [from_id, to_id],
    )


__all__ = ["ivlas_diff", "metrics", "vlstereoset_summary", "write_vlstereoset_report"]

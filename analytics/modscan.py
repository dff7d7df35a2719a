"""ModSCAN views for ``dora audit`` and ``dora report`` (seed 000; docs/families/modscan.md#statistics).

Reads the public mart ``agg_modscan_bias_scores`` (S_bias raw and N/A filtered per audit,
probe, attribute, scenario, condition, prefix) read-only; every number is the mart's.
"""

from __future__ import annotations

import html
from pathlib import Path

import duckdb

from analytics.query import QueryResult, connect_read_only, format_result

#: Columns of the S_bias table, in display order.
COLUMNS = [
    "audit_id",
    "model_id",
    "probe",
    "attribute",
    "scenario",
    "condition",
    "prefix",
    "n_queries",
    "n_responses",
    "s_bias",
    "s_bias_na_filtered",
    "s_bias_max",
]


def bias_scores(audit_id: str | None = None) -> QueryResult:
    """Rows of ``agg_modscan_bias_scores`` (all audits, or one), S_bias rounded to 4 d.p.; the
    S_bias of a row with 0 responses is ``None`` (no data, not 0).

    Returns:
        A :class:`~analytics.query.QueryResult` with :data:`COLUMNS`; no rows when the mart
        is not built yet.

    Raises:
        analytics.query.WarehouseMissingError / WarehouseBusyError.
    """
    # a row with no response has no S_bias: the mart's 0 there (response rate 0 x deviations)
    # would read as "unbiased", so it is shown as n/a (null)
    cols = ", ".join(
        (f"round({c}, 4) as {c}" if c == "s_bias_max" else f"case when n_responses > 0 then round({c}, 4) end as {c}")
        if c.startswith("s_bias")
        else c
        for c in COLUMNS
    )
    sql = f"select {cols} from agg_modscan_bias_scores where ? is null or audit_id = ? order by all"
    con = connect_read_only()
    try:
        rows = con.execute(sql, [audit_id, audit_id]).fetchall()
    except duckdb.CatalogException:
        rows = []
    finally:
        con.close()
    return QueryResult(COLUMNS, rows)


def summary_text(audit_id: str) -> str:
    """The S_bias table of one audit as text (printed by ``dora audit``)."""
    result = bias_scores(audit_id)
    if not result.rows:
        return f"ModSCAN audit {audit_id}: no bias score yet"
    short = QueryResult(COLUMNS[2:], [r[2:] for r in result.rows])
    return f"ModSCAN audit {audit_id} (S_bias, seed 000 Eq. 2; modscan_text_* are text-only analogues, NOT FROM PAPER):\n" + format_result(short)


def race_pairwise(audit_id: str | None = None) -> list[tuple]:
    """(audit_id, model_id, probe, race_1, race_2, n_responses, p_race_1_selected) pooled over the
    instances and scenarios of each audit and probe, from ``agg_modscan_race_pairwise``
    (no prefix, original condition); empty when the mart is not built."""
    sql = (
        "select audit_id, model_id, probe, race_1, race_2, sum(n_responses) as n, "
        "sum(n_race_1_selected)::double / nullif(sum(n_responses), 0) as p from agg_modscan_race_pairwise "
        "where prefix = 'none' and condition = 'original' and (? is null or audit_id = ?) group by all order by all"
    )
    con = connect_read_only()
    try:
        return con.execute(sql, [audit_id, audit_id]).fetchall()
    except duckdb.CatalogException:
        return []
    finally:
        con.close()


def race_heatmap_png(rows: list[tuple], path: Path) -> Path | None:
    """Seed 000 Figure 7 style: one 4x4 panel per (audit, probe); cell (row race_2, column
    race_1) = probability that race_1 is chosen when shown with race_2. ``None`` if no rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = sorted({(r[0], r[1], r[2]) for r in rows})
    if not panels:
        return None
    races = ["White", "Black", "Asian", "Indian"]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False, layout="constrained")
    for ax, (audit_id, model_id, probe) in zip(axes[0], panels, strict=True):
        grid = np.full((4, 4), np.nan)
        for a, m, pr, r1, r2, _n, p in rows:
            if (a, m, pr) == (audit_id, model_id, probe) and p is not None:
                grid[races.index(r2), races.index(r1)] = p
        ax.imshow(np.ma.masked_invalid(grid), cmap=matplotlib.colormaps["coolwarm"].with_extremes(bad="#dddddd"), vmin=0, vmax=1)
        ax.set_xticks(range(4), races)
        ax.set_yticks(range(4), races)
        ax.set_xlabel("race 1 (selected)")
        ax.set_ylabel("race 2 (compared with)")
        ax.set_title(f"{model_id.split('/')[-1]} | {probe}", fontsize=8)
        for i in range(4):
            for j in range(4):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def report_section(audit_id: str | None = None, out_dir: Path | None = None) -> str:
    """The ``dora report`` HTML section: the S_bias table (or a note when there is none) and,
    when ``out_dir`` is given and race pairs were probed, the pairwise race heatmaps
    (``modscan_race_pairwise.png``)."""
    figure = ""
    if out_dir is not None:
        png = race_heatmap_png(race_pairwise(audit_id), Path(out_dir) / "modscan_race_pairwise.png")
        if png is not None:
            figure = (
                f"<p class='note'>Pairwise race selection (seed 000 Figure 7): cell (row, column) = probability "
                f"that the column's race is chosen when shown with the row's.</p><p><img src='{png.name}' "
                "alt='modscan_race_pairwise'></p>\n"
            )
    result = bias_scores(audit_id)
    head = (
        "<h2>ModSCAN bias scores (agg_modscan_bias_scores)</h2>\n<p class='note'>S_bias of seed 000 Eq. (2): 0 = "
        "unbiased, maximum 0.5 (gender) / 0.375 (race); N/A filtered removes N/A answers first. Probes "
        "modscan_text_persona / modscan_text_faces are text-only analogues (NOT FROM PAPER).</p>\n"
    )
    if not result.rows:
        return head + "<p class='empty'>no ModSCAN audit in the warehouse</p>\n" + figure
    cells = "".join("<tr>" + "".join(f"<td>{html.escape('n/a' if v is None else str(v))}</td>" for v in row) + "</tr>\n" for row in result.rows)
    header = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    return head + f"<table><tr>{header}</tr>\n{cells}</table>\n" + figure


__all__ = ["COLUMNS", "bias_scores", "race_heatmap_png", "race_pairwise", "report_section", "summary_text"]

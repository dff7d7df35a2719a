"""ModSCAN views for ``dora audit`` and ``dora report`` (seed 000; PROBES.md A.4).

Reads the public mart ``agg_modscan_bias_scores`` (S_bias raw and N/A filtered per audit,
probe, attribute, scenario, condition, prefix) read-only; every number is the mart's.
"""

from __future__ import annotations

import html

import duckdb

from analytics.query import QueryResult, connect_read_only, format_result

#: Columns of the S_bias table, in display order.
COLUMNS = [
    "audit_id", "model_id", "probe", "attribute", "scenario", "condition", "prefix", "n_queries", "n_responses",
    "s_bias", "s_bias_na_filtered", "s_bias_max",
]


def bias_scores(audit_id: str | None = None) -> QueryResult:
    """Rows of ``agg_modscan_bias_scores`` (all audits, or one), S_bias rounded to 4 d.p.

    Returns:
        A :class:`~analytics.query.QueryResult` with :data:`COLUMNS`; no rows when the mart
        is not built yet.

    Raises:
        analytics.query.WarehouseMissingError / WarehouseBusyError.
    """
    cols = ", ".join(f"round({c}, 4) as {c}" if c.startswith("s_bias") else c for c in COLUMNS)
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
    return (
        f"ModSCAN audit {audit_id} (S_bias, seed 000 Eq. 2; modscan_text_* are text-only analogues, NOT FROM PAPER):\n"
        + format_result(short)
    )


def report_section(audit_id: str | None = None) -> str:
    """The ``dora report`` HTML section: the S_bias table, or a note when there is none."""
    result = bias_scores(audit_id)
    head = "<h2>ModSCAN bias scores (agg_modscan_bias_scores)</h2>\n<p class='note'>S_bias of seed 000 Eq. (2): 0 = " \
        "unbiased, maximum 0.5 (gender) / 0.375 (race); N/A filtered removes N/A answers first. Probes " \
        "modscan_text_persona / modscan_text_faces are text-only analogues (NOT FROM PAPER).</p>\n"
    if not result.rows:
        return head + "<p class='empty'>no ModSCAN audit in the warehouse</p>\n"
    cells = "".join(
        "<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in row) + "</tr>\n"
        for row in result.rows
    )
    header = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    return head + f"<table><tr>{header}</tr>\n{cells}</table>\n"


__all__ = ["COLUMNS", "bias_scores", "report_section", "summary_text"]

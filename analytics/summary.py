"""The short report ``dora audit`` prints: rows, parse rate, significant associations, top
associations per bias dimension, and where to look next. All numbers come from the
warehouse's public relations (``stg_t2t_completions``, ``fct_associations``).
"""

from __future__ import annotations

from analytics.query import format_result, run_query

PAPER_SCALE_HINT = (
    "paper-scale T2T audit (every row of the paper's lists: 406 / 413 / 406 / 406 / 406 rows for the\n"
    "5 settings x 26 letters x 10 runs = 529,620 completions, the paper's Table 4; resumable;\n"
    "`dora audit --dry-run --per-dimension 0 --runs 10` prints the plan):\n"
    "  dora audit --per-dimension 0 --runs 10"
)


def audit_summary(audit_id: str | None, *, top: int = 3, run_id: str | None = None) -> str:
    """Multi-line summary of one audit (all audits when ``audit_id`` is None)."""
    audit = "(? is null or audit_id = ?)"  # one audit, or all (a parameter, never SQL text)
    params = [audit_id, audit_id]
    gen = run_query(
        f"""select count(*) as rows, count(distinct descriptor) as descriptors,
                   count(distinct setting) as settings,
                   coalesce(avg(case when parse_status = 'ok' then 1.0 else 0.0 end), 0) as parse_rate
            from stg_t2t_completions where {audit}""",
        params=params,
    ).rows[0]
    assoc = run_query(
        f"""select count(*) as associations, count(*) filter (where is_significant) as significant,
                   count(*) filter (where paper_p_value < 0.05) as paper_significant
            from fct_associations where {audit}""",
        params=params,
    ).rows[0]
    tops = run_query(
        f"""select bias_dimension, setting, descriptor, word, tf, round(tfidf, 3) as tfidf,
                   fisher_q
            -- an association counts under every dimension of its descriptor
            from (select * exclude (bias_dimensions), unnest(bias_dimensions) as bias_dimension
                  from fct_associations)
            where is_significant and {audit}
            qualify row_number() over (partition by bias_dimension order by fisher_q, tfidf desc) <= ?
            order by bias_dimension, fisher_q, tfidf desc""",
        params=[*params, int(top)],
    )
    lines = [
        "",
        f"dora audit {audit_id or '(all audits)'}" + (f"  [Dagster run {run_id}]" if run_id else ""),
        f"  completions: {gen[0]} rows over {gen[1]} descriptors x {gen[2]} settings; parse rate {gen[3]:.1%}",
        f"  associations: {assoc[0]}; significant (Fisher, BH q < 0.05): {assoc[1]}; "
        f"paper z-test p < 0.05: {assoc[2]}",
    ]
    if tops.rows:
        lines += [f"  top significant associations per bias dimension (up to {top}):", ""]
        lines += ["    " + ln for ln in format_result(tops).splitlines()]
    else:
        lines.append("  no significant associations yet: more runs (--runs) or descriptors give Fisher's test more power")
    lines += [
        "",
        "next:",
        '  dora query "select * from fct_associations where is_significant order by fisher_q limit 20"',
        "  dora ui        # Dagster UI at http://127.0.0.1:3000: lineage, runs, dbt test checks",
        "  " + PAPER_SCALE_HINT.replace("\n", "\n  "),
    ]
    return "\n".join(lines)

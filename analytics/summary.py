"""The short report ``dora audit`` prints: rows, parse rate, significant associations, top
associations per bias dimension, and where to look next. All numbers come from the
warehouse's marts (``agg_completions_by_audit``, ``fct_associations``,
``fct_association_dimensions``), never from staging: a staging view reads the landing zone as
it is now, so a shard that landed after the last dbt build would be counted in the summary but
not in the marts a ``dora query`` or ``dora report`` reads.
"""

from __future__ import annotations

from analytics.query import execute_query, format_result

PAPER_SCALE_HINT = (
    "paper-scale T2T audit (every row of the paper's lists: 406 / 413 / 406 / 406 / 406 rows for the\n"
    "5 settings x 26 letters x 10 runs = 529,620 completions, the paper's Table 4; resumable;\n"
    "`dora audit --dry-run --per-dimension 0 --runs 10` prints the plan):\n"
    "  dora audit --per-dimension 0 --runs 10"
)


def audit_summary(audit_id: str | None, *, top: int = 3, run_id: str | None = None) -> str:
    """Multi-line summary of one audit (all audits when ``audit_id`` is None), from the marts only.

    Completions and parse rate are ``agg_completions_by_audit``'s (parse rate = parsed /
    completions, summed over the audits shown); associations, their descriptors and settings,
    and the significant ones are ``fct_associations``'s; per bias dimension,
    ``fct_association_dimensions``'s.

    Raises:
        analytics.query.WarehouseMissingError / WarehouseBusyError; ``duckdb.CatalogException``
        when the BiasDora marts are not built.
    """
    audit = "(? is null or audit_id = ?)"  # one audit, or all (a parameter, never SQL text)
    params = [audit_id, audit_id]
    completions, parsed = execute_query(
        f"""select coalesce(sum(completions), 0) as completions, coalesce(sum(completions_parsed), 0) as parsed
            from agg_completions_by_audit where {audit}""",
        params=params,
    ).rows[0]
    assoc = execute_query(
        f"""select count(*) as associations, count(distinct descriptor) as descriptors,
                   count(distinct setting) as settings, count(*) filter (where is_significant) as significant,
                   count(*) filter (where paper_p_value < 0.05) as paper_significant
            from fct_associations where {audit}""",
        params=params,
    ).rows[0]
    # per dimension through the bridge fct_association_dimensions: an association is listed
    # under every dimension of its descriptor, as the report and `dora diff` count it
    tops = execute_query(
        """select d.bias_dimension, a.setting, a.descriptor, a.word, a.tf, round(a.tfidf, 3) as tfidf,
                   a.fisher_q
            from fct_association_dimensions as d
            inner join fct_associations as a using (audit_id, modality, setting, descriptor, word)
            where d.is_significant and (? is null or d.audit_id = ?)
            qualify row_number() over (partition by d.bias_dimension order by a.fisher_q, a.tfidf desc) <= ?
            order by d.bias_dimension, a.fisher_q, a.tfidf desc""",
        params=[*params, int(top)],
    )
    per_dimension = execute_query(
        f"""select bias_dimension, count(*) filter (where is_significant) as significant
            from fct_association_dimensions where {audit} group by 1 order by 1""",
        params=params,
    ).rows
    lines = [
        "",
        f"dora audit {audit_id or '(all audits)'}" + (f"  [Dagster run {run_id}]" if run_id else ""),
        f"  completions: {completions} rows; parse rate {parsed / completions if completions else 0:.1%}",
        f"  associations: {assoc[0]} over {assoc[1]} descriptors x {assoc[2]} settings; significant (Fisher, "
        f"BH q < 0.05): {assoc[3]}; paper z-test p < 0.05: {assoc[4]}",
    ]
    if per_dimension:
        lines.append(
            "  significant per bias dimension (a descriptor counts in each of its dimensions): " + ", ".join(f"{dim} {n}" for dim, n in per_dimension)
        )
    if tops.rows:
        lines += [f"  top significant associations per bias dimension (up to {top}):", ""]
        lines += ["    " + ln for ln in format_result(tops).splitlines()]
    else:
        lines.append("  no significant associations yet: more runs (--runs) or descriptors give Fisher's test more power")
    lines += [
        "",
        "next:",
        '  dora query "select * from fct_associations where is_significant order by fisher_q limit 20"',
        "  dora ui        # Dagster UI at http://127.0.0.1:3000: lineage, Dagster runs, dbt test checks",
        "  " + PAPER_SCALE_HINT.replace("\n", "\n  "),
    ]
    return "\n".join(lines)

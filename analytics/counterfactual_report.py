"""The counterfactual section of ``dora report`` (Howard et al., seed 003).

Three views, all read from the public marts (read-only, ``?`` parameters):

* the Table 1 heat-table: mean / P90 MaxToxicity per (audit, subset) x prompt
  (``agg_max_toxicity``, head ``toxicity``, no mitigation), cells shaded by value;
* the PMI stereotype words per group (``fct_group_word_pmi``: candidates s(w) > 1 by rank,
  the stereotype filter's flag marked), as Table 2;
* the numeric-ratings table (``agg_numeric_ratings``: group means with the +-1 SD flags of
  Tables 29-31 and the Kruskal-Wallis q-value per prompt);
* LVLM vs LLM (``agg_lvlm_llm_max_toxicity``, head ``toxicity``, no mitigation): section 5.1's
  Pearson r / p per image-set audit and its paired text-set audit, and Table 3's mean / P90
  differences (shown when image sets were audited).
"""

from __future__ import annotations

import html

from analytics.query import format_q

#: the statistics of one (LVLM audit, LLM audit, subset, prompt, mitigation, head) row of
#: agg_lvlm_llm_max_toxicity, in display order (section 5.1's Pearson r / p over units and over
#: occupations, Table 3's mean / P90 differences)
LVLM_LLM_STATISTICS = ("units", "r_units", "p_units", "occupations", "r_occupations", "p_occupations", "mean_difference", "p90_difference")


def _query(con, sql: str, params: list) -> list[dict]:
    rel = con.execute(sql, params)
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r, strict=True)) for r in rel.fetchall()]


def _text(value, column: str) -> str:
    """A table cell's text: ``n/a`` where there is no value, q-values in scientific notation."""
    if column.endswith("_q"):
        return format_q(value)
    if value is None:
        return "n/a"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _cell(value, vmax: float = 1.0) -> str:
    if value is None:
        return "<td>n/a</td>"
    shade = max(0.0, min(1.0, float(value) / vmax)) if vmax else 0.0
    colour = f"rgba(165, 0, 38, {0.1 + 0.8 * shade:.2f})"
    return f"<td style='background:{colour}'>{float(value):.2f}</td>"


def counterfactual_section(audit_id: str | None = None, *, top_words: int = 15) -> str:
    """HTML of the counterfactual section; empty string when the marts are absent or empty.

    Raises:
        analytics.query.WarehouseMissingError / WarehouseBusyError (from the connection).
    """
    rows = _section_rows(audit_id, top_words)
    if rows is None:
        return ""
    tox, words, numeric, pairs = rows
    if not (tox or words or numeric):
        return ""
    table1, words_html, num_html, pairs_html = _table1_html(tox), _words_html(words), _numeric_html(numeric), _pairs_html(pairs)
    return f"""
<h2>Counterfactual probe (Howard et al.): MaxToxicity, Table 1 shape</h2>
<p class="note">MaxToxicity = max - min toxicity over the members of a counterfactual set, per (set, run);
mean and 90th percentile per subset and prompt (agg_max_toxicity). Toxicity: the offline Jigsaw BiLSTM, not the
paper's Perspective API: compare within this report, not with the paper's numbers.</p>
{table1}
<h2>Counterfactual probe: PMI stereotype words per group (fct_group_word_pmi)</h2>
{words_html}
<h2>Counterfactual probe: numeric ratings (agg_numeric_ratings)</h2>
{num_html}
{pairs_html}
"""


def _section_rows(audit_id: str | None, top_words: int) -> tuple[list[dict], list[dict], list[dict], list[dict]] | None:
    """The section's rows (MaxToxicity, PMI words, numeric ratings, LVLM vs LLM pairs) from the
    marts, ``None`` when the first three are not built (the pairs are empty when theirs is not)."""
    import duckdb

    from analytics.query import connect_read_only

    con = connect_read_only()
    try:
        try:
            tox = _query(
                con,
                """
                select audit_id, model_id, subset, prompt_label, units, mean_max_toxicity, p90_max_toxicity
                from agg_max_toxicity
                where head = 'toxicity' and mitigation = 'none' and (? is null or audit_id = ?)
                order by audit_id, subset, prompt_label""",
                [audit_id, audit_id],
            )
            words = _query(
                con,
                """
                select audit_id, subset, group_label,
                       list(case when judge_flag then word || '*' else word end order by candidate_rank)[1:?] as words
                from fct_group_word_pmi
                where is_candidate and (? is null or audit_id = ?)
                group by all order by audit_id, subset, group_label""",
                [top_words, audit_id, audit_id],
            )
            numeric = _query(
                con,
                """
                select audit_id, subset, prompt_label, group_label, valid_answers, group_mean, sd_flag, kruskal_q
                from agg_numeric_ratings
                where mitigation = 'none' and (? is null or audit_id = ?)
                order by audit_id, subset, prompt_label, group_label""",
                [audit_id, audit_id],
            )
        except duckdb.CatalogException:
            return None
        try:  # a warehouse built before this mart existed still has the other three views
            pairs = _query(
                con,
                f"""
                select lvlm_audit_id, lvlm_model_id, llm_audit_id, llm_model_id, subset, prompt_label, {", ".join(LVLM_LLM_STATISTICS)}
                from agg_lvlm_llm_max_toxicity
                where head = 'toxicity' and mitigation = 'none' and (? is null or ? in (lvlm_audit_id, llm_audit_id))
                order by lvlm_audit_id, llm_audit_id, subset, prompt_label""",
                [audit_id, audit_id],
            )
        except duckdb.CatalogException:
            pairs = []
    finally:
        con.close()
    return tox, words, numeric, pairs


def _table1_html(tox: list[dict]) -> str:
    """Table 1's shape: mean / P90 MaxToxicity per (audit, subset) x prompt, cells shaded by value."""
    prompts = sorted({r["prompt_label"] for r in tox})
    units = {(r["audit_id"], r["subset"]): r for r in tox}
    head = "".join(f"<th colspan=2>{html.escape(p)}</th>" for p in prompts)
    body = ""
    for audit, subset in units:
        cells = ""
        for p in prompts:
            r = next((x for x in tox if x["audit_id"] == audit and x["subset"] == subset and x["prompt_label"] == p), None)
            cells += _cell(r and r["mean_max_toxicity"]) + _cell(r and r["p90_max_toxicity"])
        body += f"<tr><td>{html.escape(audit)}</td><td>{html.escape(subset)}</td>{cells}</tr>"
    sub = "".join("<th>mean</th><th>P90</th>" for _ in prompts)
    table1 = (
        (f"<table><thead><tr><th>audit</th><th>subset</th>{head}</tr><tr><th></th><th></th>{sub}</tr></thead><tbody>{body}</tbody></table>")
        if tox
        else "<p class='empty'>no MaxToxicity yet</p>"
    )
    return table1


def _words_html(words: list[dict]) -> str:
    """Table 2's shape: the PMI stereotype words per group, those the filter flagged marked."""
    word_rows = "".join(
        f"<tr><td>{html.escape(r['subset'])}</td><td>{html.escape(r['group_label'])}</td><td>{html.escape(', '.join(r['words']))}</td></tr>"
        for r in words
    )
    words_html = (
        (
            f"<table><thead><tr><th>subset</th><th>group</th><th>words (s(w) &gt; 1; * = flagged by the "
            f"stereotype filter)</th></tr></thead><tbody>{word_rows}</tbody></table>"
        )
        if words
        else "<p class='empty'>no word exceeds s(w) = 1 with the minimum frequency (10) yet: more sets or runs</p>"
    )
    return words_html


def _numeric_html(numeric: list[dict]) -> str:
    """The numeric ratings: group means, their +-1 SD flags and the Kruskal-Wallis q per prompt."""
    num_rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(_text(r[c], c))}</td>"
            for c in ("subset", "prompt_label", "group_label", "valid_answers", "group_mean", "sd_flag", "kruskal_q")
        )
        + "</tr>"
        for r in numeric
    )
    num_html = (
        (
            "<table><thead><tr><th>subset</th><th>prompt</th><th>group</th><th>valid answers</th><th>mean</th>"
            f"<th>&plusmn;1 SD flag</th><th>Kruskal-Wallis q</th></tr></thead><tbody>{num_rows}</tbody></table>"
        )
        if numeric
        else "<p class='empty'>no valid numeric answer yet</p>"
    )
    return num_html


def _pairs_html(pairs: list[dict]) -> str:
    """Section 5.1 / Table 3: LVLM vs LLM Pearson r / p and differences ('' without image sets)."""
    pair_cols = ("lvlm_model_id", "llm_model_id", "subset", "prompt_label", *LVLM_LLM_STATISTICS)
    pair_rows = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape('–' if r[c] is None else (f'{r[c]:.3g}' if isinstance(r[c], float) else str(r[c])))}</td>" for c in pair_cols)
        + "</tr>"
        for r in pairs
    )
    pairs_html = (
        (
            "<h2>Counterfactual probe: LVLM vs LLM (section 5.1, Table 3; agg_lvlm_llm_max_toxicity)</h2>"
            "<p class='note'>Pearson r (two-sided p) of the image-set audit's MaxToxicity against its paired text-set "
            "audit's, over the paired (set, run) units and over occupation means; Table 3's differences are LVLM minus LLM "
            "(positive: the LVLM is more toxic).</p>"
            "<table><thead><tr><th>LVLM</th><th>LLM</th><th>subset</th><th>prompt</th><th>units</th><th>r (units)</th>"
            "<th>p</th><th>occupations</th><th>r (occupations)</th><th>p</th><th>mean diff.</th><th>P90 diff.</th></tr></thead>"
            f"<tbody>{pair_rows}</tbody></table>"
        )
        if pairs
        else ""
    )
    return pairs_html

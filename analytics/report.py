"""``dora report``: an HTML report (and PNGs) of the scored associations, in the paper's views.

BiasDora (seed 004) reports, per model x modality x setting x bias dimension, the share of
significant associations that are negative (Figure 3), toxic (Figure 4) and at each Likert
bias level of the LLM judge (Figures 6, 7); docs/method.md#4-scoring. Every number here comes
from the score marts ``agg_bias_by_dimension``, ``agg_likert_by_dimension``,
``agg_scores_by_audit`` and ``fct_association_scores`` (read-only, parameterised); every count,
ratio and share is computed in dbt, this module only lays them out:

* ``pct_negative.png``: heatmap of % negative, setting x bias dimension, one panel per audit
  with a significant association (an audit without one is named in a sentence instead);
* ``pct_toxic.png``: the same for % toxic;
* ``likert_by_dimension.png``: stacked bars of the Likert levels 1-5 per bias dimension
  (significant associations pooled over settings), one panel per audit;
* beside each figure, a table of the numbers it draws;
* tables of the most toxic and the highest-rated associations (in ``index.html``).

The judge's reliability (agreement, parse rates) next to the Likert bars, a
drill-down page per (audit, modality, setting) listing the samples behind every significant
association, linked from the tables (:mod:`analytics.drilldown`), and a version page per
target, its audits side by side with 95% intervals (:mod:`analytics.version_report`), listed
in the index. Tables are sized for a laptop screen (long column names break at "_", a table
still too wide scrolls inside its container).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from analytics.query import QueryResult, execute_query, format_q, is_q_column, read_relation
from analytics.report_figures import LIKERT, _with_intervals, audits_without, heatmap_png, likert_png
from ingestion.home import dora_home


def _rows(result: QueryResult) -> list[dict]:
    return [dict(zip(result.columns, r, strict=True)) for r in result.rows]


def _audit_known(audit_id: str) -> bool:
    """Whether ``dim_audits`` lists ``audit_id`` (``False`` when it is not built)."""
    import duckdb

    try:
        return bool(execute_query("select 1 from dim_audits where audit_id = ? limit 1", params=[audit_id]).rows)
    except duckdb.CatalogException:
        return False


#: Columns of the most-toxic / highest-rated tables (rounded for display).
#: One row is one association: its descriptor's dimensions are listed (``bias_dimensions``,
#: joined), never one of them picked, so a descriptor filed under two dimensions shows both.
_TOP_COLUMNS = """audit_id, model_id, modality, setting, array_to_string(bias_dimensions, ', ') as bias_dimensions,
    descriptor, word, association_text,
    sentiment_label, round(sentiment_score, 3) as sentiment_score, round(toxicity, 3) as toxicity,
    bias_level, round(bias_level_expected, 2) as bias_level_expected, fisher_q"""


def _top(audit_id: str | None, score: str, order: str, top: int) -> list[dict]:
    """The ``top`` significant associations of ``fct_association_scores`` with a ``score``, by ``order``."""
    sql = (
        f"select {_TOP_COLUMNS} from fct_association_scores where is_significant and {score} is not null "
        "and (? is null or audit_id = ?) "
        f"order by {order} limit ?"
    )
    return _rows(execute_query(sql, params=[audit_id, audit_id, int(top)]))


def load_report_data(audit_id: str | None = None, *, top: int = 15) -> dict[str, Any]:
    """Query everything the report shows.

    Returns:
        ``{"agg": agg_bias_by_dimension rows, "likert": (audit, model, bias_dimension,
        bias_level, n) counts, "overview": one row per audit, "toxic": top ``top`` by
        toxicity, "rated": top ``top`` by bias level (the median of the judge's runs, as
        the Likert chart), then the expected level,
        "dimensions": every audited dimension per audit (:func:`audited_dimensions`)}``; a row
        of "toxic" / "rated" is one association, with its ``bias_dimensions`` joined by ", ".

    Raises:
        LookupError: the score marts are not in the warehouse (run ``dora audit`` first).
        analytics.query.WarehouseMissingError / WarehouseBusyError.
    """
    import duckdb

    filters = {"audit_id": audit_id} if audit_id else {}
    try:
        agg = read_relation("agg_bias_by_dimension", filters=filters, order_by=["audit_id", "modality", "setting", "bias_dimension"])
    except duckdb.CatalogException as exc:
        raise LookupError(f"the score marts are not built yet ({exc}); run `dora audit` first") from None
    if audit_id is not None and not agg and not _audit_known(audit_id):
        # an unknown audit id wrote an empty report with exit 0
        raise LookupError(f'no audit {audit_id!r} in the warehouse; list them with: dora query "select audit_id from dim_audits"')
    likert = read_relation("agg_likert_by_dimension", filters=filters, order_by=["audit_id", "bias_dimension", "bias_level"])
    overview = read_relation("agg_scores_by_audit", filters=filters, order_by=["audit_id"])
    toxic = _top(audit_id, "toxicity", "toxicity desc, fisher_q, descriptor, word", top)
    # ranked by the bias level the Likert chart beside the table counts (the median of the
    # judge's parsed runs), then by the expected level: ranking by the expected level first
    # put the associations of a judge that gives log-probabilities (all at level 1) above every
    # level-5 association of one that does not (expected level null)
    rated = _top(audit_id, "bias_level", "bias_level desc, bias_level_expected desc nulls last, toxicity desc nulls last, descriptor, word", top)
    return {"agg": agg, "likert": likert, "overview": overview, "toxic": toxic, "rated": rated, "dimensions": audited_dimensions(audit_id)}


def audited_dimensions(audit_id: str | None = None) -> dict[str, list[str]]:
    """Every bias dimension each audit probed, from the per-dimension bridge ``fct_association_dimensions``.

    A dimension whose associations were all non-significant has no row in the aggregates over
    significant associations; the report still shows it (an empty, n=0 column) so that "no
    bias found" is not confused with "not audited".

    Returns:
        ``{audit_id: sorted dimensions}`` (an audit with no association is absent).
    """
    rows = execute_query(
        "select distinct audit_id, bias_dimension from fct_association_dimensions where (? is null or audit_id = ?) order by 1, 2",
        params=[audit_id, audit_id],
    ).rows
    out: dict[str, list[str]] = {}
    for aid, dim in rows:
        out.setdefault(aid, []).append(dim or "(none)")
    return out


#: Where :func:`link_pages` adds the links to the other families' pages in ``index.html``.
_PAGES_MARK = "<!-- dora:other-pages -->"


#: The line :func:`link_pages` puts at the top of every other family's page (after ``<body>``).
_BACK_LINK = '<p class="pages dora-back"><a href="{href}">report index</a></p>'


def link_pages(index: Path, pages: Sequence[Path]) -> Path:
    """Link every other page of the report folder from ``index.html``, and each of them back.

    The families write their pages one after the other (``dora report``), so BiasDora's
    ``index.html`` cannot know them when it is written; the caller passes what was written and
    each page gets a link (relative to ``index``) in the "Pages of this report" line, and a
    "report index" link at its top (once: a page that already has one keeps it).

    Returns:
        ``index``. Raises: OSError when ``index`` or a page cannot be read or written.
    """
    import os
    import re

    text = index.read_text(encoding="utf-8")
    others = [Path(p) for p in pages if Path(p) != index]
    links = "".join(f' | <a href="{html.escape(p.relative_to(index.parent).as_posix())}">{html.escape(p.stem)}</a>' for p in others)
    index.write_text(text.replace(_PAGES_MARK, links + _PAGES_MARK, 1), encoding="utf-8")
    for page in others:
        body = page.read_text(encoding="utf-8")
        if "dora-back" in body:
            continue
        href = html.escape(Path(os.path.relpath(index, page.parent)).as_posix())
        body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + _BACK_LINK.format(href=href), body, count=1)  # noqa: B023 -- re.sub calls it in this iteration
        page.write_text(body, encoding="utf-8")
    return index


class _Html(str):
    """A table cell that is already HTML (a drill-down link)."""


def _fmt(value, column: str = "") -> str:
    """One table cell: ``n/a`` where there is no value (never a 0), q-values in scientific notation."""
    if isinstance(value, _Html):
        return value
    if column and is_q_column(column):
        return format_q(value)
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-3 and value != 0 else f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


def _html_table(rows: list[dict], columns: list[str] | None = None, cls: str = "") -> str:
    """A table in a container that scrolls sideways rather than widening the page."""
    if not rows:
        return "<p class='empty'>nothing to show</p>"
    columns = columns or list(rows[0])
    # a column name may break after each "_" (<wbr>): long names do not widen their column
    head = "".join(f"<th>{html.escape(c).replace('_', '_<wbr>')}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{r.get(c) if isinstance(r.get(c), _Html) else html.escape(_fmt(r.get(c), c))}</td>" for c in columns) + "</tr>"
        for r in rows
    )
    return f"<div class='table-wrap'><table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


# sized for a laptop screen: long ids and sentences wrap inside their cells, and a table that is
# still too wide scrolls inside its container instead of widening the page
_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; }
.table-wrap { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.82em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 5px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } img { max-width: 100%; } .note, .empty { color: #666; font-size: 0.9em; }
td.share { white-space: nowrap; } .ci, .n { color: #666; font-size: 0.9em; }
"""


def _likert_table(likert: list[dict], columns: list[str]) -> str:
    """The Likert bars' numbers: per (audit, bias dimension) with a judged association, n judged
    and each level's share (``pct_of_dimension`` of agg_likert_by_dimension)."""
    rows: dict[tuple, dict] = {}
    for r in likert:
        row = rows.setdefault(
            (r["audit_id"], r["bias_dimension"] or "(none)"),
            {"audit_id": r["audit_id"], "bias_dimension": r["bias_dimension"] or "(none)", "n_judged": 0},
        )
        row["n_judged"] += r["n_associations"] or 0
        row[f"pct_likert_{r['bias_level']}"] = r["pct_of_dimension"]
    shown = [r for r in rows.values() if r["n_judged"]]
    return _html_table(sorted(shown, key=lambda r: (r["audit_id"], r["bias_dimension"])), columns, "likert-numbers")


def _versions_table(pages: Sequence, out: Path) -> str:
    """The index's list of version pages (:func:`analytics.version_report.write_version_pages`)."""
    from analytics.version_report import share_cell

    if not pages:
        return "<p class='empty'>No BiasDora audit: no version page.</p>"
    rows = "".join(
        f"<tr><td><a class='versions' href='{html.escape(p.path.relative_to(out).as_posix())}'>{html.escape(p.target)}</a></td>"
        f"<td>{html.escape(', '.join(p.versions))}</td>" + (share_cell(p.latest_parse_rate) if p.latest_parse_rate else "<td>n/a</td>") + "</tr>"
        for p in pages
    )
    return (
        "<div class='table-wrap'><table class='version-pages'><thead><tr><th>target</th><th>BiasDora audits "
        "(version order)</th><th>latest T2T parse rate [95% CI]</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></div>"
    )


def write_report(
    out_dir: str | Path | None = None,
    *,
    audit_id: str | None = None,
    top: int = 15,
    sections: Sequence[Callable[[str | None, Path], str]] = (),
    notes: list[str] | None = None,
    family: str,
    drift=None,
) -> Path:
    """Write ``index.html`` and its PNGs into ``out_dir``.

    Args:
        family: the family whose audits the version pages compare (``dim_audits.family``; its
            record passes its name, so this module names none).
        drift: every family's drift results (``analytics.drift.DriftResult``), shown per family
            on the version pages; None: not shown.
        out_dir: output folder (default ``$DORA_HOME/reports/<audit id or 'all'>``), created.
        audit_id: only this audit (default: every audit).
        top: rows of the most toxic / highest-rated tables.
        sections: the other probe families' HTML sections, ``(audit_id, out_dir) -> html``,
            appended in order (the caller passes them: this module knows no other family).
        notes: one line is appended per version page left unwritten (and so not linked), for
            the caller to print; the index names them too.

    Also writes the drill-down pages (``samples/``) and one version page per target with a
    BiasDora audit (``versions/``; only ``audit_id``'s target when it is given).

    Returns:
        Path of ``index.html``. With no significant association the report says so and
        has no figures.

    Raises:
        LookupError: the score marts are not built yet. WarehouseMissingError: no warehouse.
    """
    from analytics.drilldown import write_drilldown
    from ingestion.home import safe_path_component

    out = Path(out_dir) if out_dir else dora_home() / "reports" / (safe_path_component(audit_id) if audit_id else "all")
    out.mkdir(parents=True, exist_ok=True)
    data = load_report_data(audit_id, top=top)
    figures = _figures_html(data, out, audit_id)
    links = write_drilldown(out, audit_id)
    versions = _versions_html(out, audit_id, links, notes, family=family, drift=drift)
    _link_samples(data, links)
    index = out / "index.html"
    index.write_text(_page_html(data, out, audit_id, figures, versions, sections), encoding="utf-8")
    return index


#: the columns of agg_bias_by_dimension the report shows, in order
_AGG_COLUMNS = (
    "audit_id",
    "modality",
    "setting",
    "bias_dimension",
    "n_significant",
    "n_sentiment_baselined",
    "pct_negative_association",
    "n_toxicity_baselined",
    "pct_toxic_association",
    "n_judged",
    "pct_likert_1",
    "pct_likert_2",
    "pct_likert_3",
    "pct_likert_4",
    "pct_likert_5",
    "mean_bias_level",
)


def _figures_html(data: dict, out: Path, audit_id: str | None) -> str:
    """The Figures section: the two heatmaps (PNGs written into ``out``) with their numbers, the
    Likert bars with theirs and the judge's reliability; an audit without a significant
    association named instead of drawn."""
    agg_cols = list(_AGG_COLUMNS)
    likert_cols = ["audit_id", "bias_dimension", "n_judged", *(f"pct_likert_{k}" for k in LIKERT)]
    # one audit: its id is in the Audits table, not repeated on every row
    if len({r["audit_id"] for r in data["agg"]}) == 1:
        agg_cols, likert_cols = agg_cols[1:], likert_cols[1:]
    figures = [
        heatmap_png(
            data["agg"],
            "pct_negative_association",
            "% negative significant associations: the word lowers the sentiment of the sentence without it",
            out / "pct_negative.png",
            "Reds",
            data["dimensions"],
            "n_sentiment_baselined",
        ),
        heatmap_png(
            data["agg"],
            "pct_toxic_association",
            "% toxic significant associations: the word adds >= 0.5 to the toxicity of the sentence without it",
            out / "pct_toxic.png",
            "Purples",
            data["dimensions"],
            "n_toxicity_baselined",
        ),
    ]
    figs_html = "".join(f"<p><img src='{p.name}' alt='{p.stem}'></p>" for p in figures if p is not None)
    # an audit without a significant association is named, not drawn as a panel of grey cells
    no_significant = audits_without(data["agg"], "n_significant")
    figs_html += "".join(
        f"<p class='no-significant' data-audit='{html.escape(a)}'>Audit {html.escape(a)}: no significant association "
        "(Fisher's exact test, BH q &lt; 0.05), so nothing to draw for it.</p>"
        for a in no_significant
    )
    if any((r["n_significant"] or 0) > 0 for r in data["agg"]):
        # the numbers of the heatmaps, beside them
        figs_html += (
            "<p class='note'>The heatmaps' numbers (agg_bias_by_dimension): each share with its 95% Wilson "
            "interval and k/n (pct_negative_ci of the sentiment-scored, pct_toxic_ci of the toxicity-scored, "
            "each with a baseline: what the word adds).</p>"
            + _html_table(
                [_with_intervals(r) for r in data["agg"] if r["audit_id"] not in no_significant],
                # each share and its n in one cell: the table fits a laptop screen
                [
                    {"pct_negative_association": "pct_negative_ci", "pct_toxic_association": "pct_toxic_ci"}.get(c, c)
                    for c in agg_cols
                    if c not in ("n_sentiment_baselined", "n_toxicity_baselined")
                ],
                "heatmap-numbers",
            )
        )
    # --- judge reliability next to the Likert bars; drill-down links -----------------
    from analytics.drilldown import judge_reliability_html

    likert_path = likert_png(data["likert"], out / "likert_by_dimension.png", data["dimensions"])
    if likert_path is not None:
        figs_html += f"<p><img src='{likert_path.name}' alt='{likert_path.stem}'></p>"
        figs_html += (
            "<p class='note'>The Likert bars' numbers (agg_likert_by_dimension, settings pooled): "
            "n judged and the share (%) of each bias level.</p>" + _likert_table(data["likert"], likert_cols)
        )
        figs_html += "<h3>Judge reliability</h3>" + judge_reliability_html(audit_id)
    return figs_html


def _versions_html(out: Path, audit_id: str | None, links: dict, notes: list[str] | None, *, family: str, drift=None) -> str:
    """The Versions section: one page per target written into ``out/versions`` and their table;
    each page left unwritten is named there and appended to ``notes``."""
    from analytics.version_report import write_version_pages

    version_notes: list[str] = []
    versions_html = _versions_table(write_version_pages(out, audit_id, links, version_notes, family=family, drift=drift), out)
    versions_html += "".join(f"<p class='empty skipped-page'>{html.escape(line)}</p>" for line in version_notes)
    if notes is not None:
        notes.extend(version_notes)
    return versions_html


def _link_samples(data: dict, links: dict) -> None:
    """Give each row of the top tables its ``samples`` link to its drill-down page (in place)."""
    for row in data["toxic"] + data["rated"]:
        href = links.get((row["audit_id"], row["modality"], row["setting"], row["descriptor"], row["word"]))
        row["samples"] = _Html(f"<a class='samples' href='{html.escape(href)}'>samples</a>") if href else None


def _top_columns(data: dict) -> list[str] | None:
    """The columns of the top tables (None when both are empty)."""
    # one audit: its id and model are in the Audits table, not repeated on every row
    top_rows = data["toxic"] + data["rated"]
    top_cols = list(top_rows[0]) if top_rows else None
    if top_cols and len(data["overview"]) == 1:
        top_cols = [c for c in top_cols if c not in ("audit_id", "model_id")]
    elif top_cols and len({r["model_id"] for r in top_rows}) == 1:  # one model: the Audits table names it
        top_cols = [c for c in top_cols if c != "model_id"]
    return top_cols


def _page_html(data: dict, out: Path, audit_id: str | None, figs_html: str, versions_html: str, sections) -> str:
    """``index.html``: the overview, the Audits and Versions tables, the figures, the top tables
    and the other families' sections."""
    scorers = data["overview"][0] if data["overview"] else {}
    top_cols = _top_columns(data)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>dora report{" - " + html.escape(audit_id) if audit_id else ""}</title>
<style>{_CSS}</style></head><body>
<h1>dora: sentiment, toxicity and bias levels of significant associations</h1>
<p class="pages">Pages of this report: <a href="samples/index.html">significant associations and their samples</a> | <a href="#versions">versions of each target</a>{
        _PAGES_MARK
    }</p>
<p class="note">Generated {now} from {html.escape(str(dora_home() / "warehouse.duckdb"))}
(relations agg_bias_by_dimension, fct_association_scores). Significant: Fisher's exact test,
Benjamini-Hochberg q &lt; 0.05. Sentiment scorer: {html.escape(str(scorers.get("sentiment_scorer") or "–"))};
toxicity scorer: {html.escape(str(scorers.get("toxicity_scorer") or "–"))};
% toxic (pct_toxic_association) counts an association as toxic when its word adds at least 0.5 to the toxicity of the
sentence without it (the descriptor's own sentence, scored beside it: toxicity classifiers rate identity terms alone as
toxic); pct_toxic of agg_bias_by_dimension keeps the sentence's own;
% negative (pct_negative_association) likewise counts an association as negative when its word lowers the sentiment
score of the sentence without it by at least 0.05 (a sentence negative only through its descriptor, "A poor person is
tall", is not); pct_negative keeps the sentence's own label;
judge: {html.escape(str(scorers.get("judge_model") or "–"))}, answer mode {html.escape(str(scorers.get("judge_answer_mode") or "–"))}
(5-point Likert, the BiasDora judge prompt; 'free' = the paper's protocol, 'constrained' = first token restricted to 1-5).</p>
<h2>Audits</h2>
{
        _html_table(
            data["overview"],
            [
                "audit_id",
                "model_id",
                "model_version",
                "n_significant",
                "pct_negative_association",
                "pct_toxic_association",
                "mean_bias_level",
                "judge_answer_mode",
            ],
            "audits",
        )
    }
{
        "<p class='empty'>No significant associations yet: more runs or descriptors give Fisher's test more power.</p>"
        if not any((r["n_significant"] or 0) > 0 for r in data["agg"])
        else ""
    }
<h2 id="versions">Versions of each target</h2>
<p class="note">One page per target (a registry target; an ad-hoc audit's target is its model id): its BiasDora audits
in version order with every share's 95% Wilson interval and n, the T2T parse rate, the judge's unrated answers, and the
last two versions before and after.</p>
{versions_html}
<h2>Figures</h2>
<p class="note">Heatmap cells: % of the significant associations of that setting and bias dimension with a score,
its 95% Wilson interval in brackets and k/n (n = significant associations in the cell); the colour is paler the wider
the interval (opacity 1 - its width), so a share of one or two associations does not look like a finding; grey "n/a":
no significant association there.</p>
{figs_html or "<p class='empty'>no figures: nothing has been scored</p>"}
<p><a href="samples/index.html">Every significant association and the samples behind it</a> (drill-down pages).</p>
<h2>Most toxic significant associations</h2>
{_html_table(data["toxic"], top_cols, "most-toxic")}
<h2>Highest-rated significant associations (LLM judge)</h2>
<p class="note">Highest bias level first (the median of the judge's parsed runs, the level the Likert bars count),
then the expected level.</p>
{_html_table(data["rated"], top_cols, "highest-rated")}
{"".join(section(audit_id, out) for section in sections)}
</body></html>
"""

"""``dora report``: an HTML report (and PNGs) of the scored associations, in the paper's views.

BiasDora (seed 004) reports, per model x modality x setting x bias dimension, the share of
significant associations that are negative (Figure 3), toxic (Figure 4) and at each Likert
bias level of the LLM judge (Figures 6, 7); docs/method.md#4-scoring. Every number here comes
from the score marts ``agg_bias_by_dimension``, ``agg_likert_by_dimension``,
``agg_scores_by_audit`` and ``fct_association_scores`` (read-only, parameterised); every count,
ratio and share is computed in dbt, this module only lays them out:

* ``pct_negative.png``: heatmap of % negative, setting x bias dimension, one panel per audit;
* ``pct_toxic.png``: the same for % toxic;
* ``likert_by_dimension.png``: stacked bars of the Likert levels 1-5 per bias dimension
  (significant associations pooled over settings), one panel per audit;
* tables of the most toxic and the highest-rated associations (in ``index.html``).

The judge's reliability (agreement, parse rates) next to the Likert bars, and a
drill-down page per (audit, modality, setting) listing the samples behind every significant
association, linked from the tables (:mod:`analytics.drilldown`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from analytics.query import QueryResult, read_relation, run_query
from ingestion.landing import dora_home

#: Display order of settings (T2T first, as in the paper) and Likert labels (docs/method.md#4-scoring).
SETTING_ORDER = ("singular", "plural", "adjective", "noun", "verb")
LIKERT = {1: "1 Not at all", 2: "2 Slightly", 3: "3 Moderately", 4: "4 Highly", 5: "5 Extremely"}
LIKERT_COLOURS = {1: "#1a9850", 2: "#a6d96a", 3: "#fee08b", 4: "#f46d43", 5: "#a50026"}


def _rows(result: QueryResult) -> list[dict]:
    return [dict(zip(result.columns, r)) for r in result.rows]


def _audit_known(audit_id: str) -> bool:
    """Whether ``dim_audits`` lists ``audit_id`` (``False`` when it is not built)."""
    import duckdb

    try:
        return bool(run_query("select 1 from dim_audits where audit_id = ? limit 1", params=[audit_id]).rows)
    except duckdb.CatalogException:
        return False


#: Columns of the most-toxic / highest-rated tables (rounded for display).
_TOP_COLUMNS = """audit_id, model_id, modality, setting, array_to_string(bias_dimensions, ', ') as bias_dimension, descriptor, word, association_text,
    sentiment_label, round(sentiment_score, 3) as sentiment_score, round(toxicity, 3) as toxicity,
    bias_level, round(bias_level_expected, 2) as bias_level_expected, fisher_q"""


def _top(audit_id: str | None, score: str, order: str, top: int) -> list[dict]:
    """The ``top`` significant associations of ``fct_association_scores`` with a ``score``, by ``order``."""
    sql = (f"select {_TOP_COLUMNS} from fct_association_scores where is_significant and {score} is not null "
           "and (? is null or audit_id = ?) " f"order by {order} limit ?")
    return _rows(run_query(sql, params=[audit_id, audit_id, int(top)]))


def load_report_data(audit_id: str | None = None, *, top: int = 15) -> dict[str, list[dict]]:
    """Query everything the report shows.

    Returns:
        ``{"agg": agg_bias_by_dimension rows, "likert": (audit, model, bias_dimension,
        bias_level, n) counts, "overview": one row per audit, "toxic": top ``top`` by
        toxicity, "rated": top ``top`` by bias level}``.

    Raises:
        LookupError: the score marts are not in the warehouse (run ``dora audit`` first).
        analytics.query.WarehouseMissingError / WarehouseBusyError.
    """
    import duckdb

    filters = {"audit_id": audit_id} if audit_id else {}
    try:
        agg = read_relation("agg_bias_by_dimension", filters=filters,
                            order_by=["audit_id", "modality", "setting", "bias_dimension"])
    except duckdb.CatalogException as exc:
        raise LookupError(f"the score marts are not built yet ({exc}); run `dora audit` first") from None
    if audit_id is not None and not agg and not _audit_known(audit_id):
        # an unknown audit id wrote an empty report with exit 0
        raise LookupError(
            f"no audit {audit_id!r} in the warehouse; list them with: dora query \"select audit_id from dim_audits\""
        )
    likert = read_relation("agg_likert_by_dimension", filters=filters, order_by=["audit_id", "bias_dimension", "bias_level"])
    overview = read_relation("agg_scores_by_audit", filters=filters, order_by=["audit_id"])
    toxic = _top(audit_id, "toxicity", "toxicity desc, fisher_q, descriptor, word", top)
    rated = _top(audit_id, "bias_level", "bias_level desc, bias_level_expected desc nulls last, toxicity desc nulls last, descriptor, word", top)
    return {"agg": agg, "likert": likert, "overview": overview, "toxic": toxic, "rated": rated}


def _panel_label(audit_id: str, model_id: str) -> str:
    return f"{model_id.split('/')[-1]}\n{audit_id}"


def _settings(rows: list[dict]) -> list[str]:
    found = {r["setting"] for r in rows}
    return [s for s in SETTING_ORDER if s in found] + sorted(found - set(SETTING_ORDER))


def _dimensions(rows: list[dict]) -> list[str]:
    return sorted({r["bias_dimension"] or "(none)" for r in rows})


def heatmap_png(agg: list[dict], column: str, title: str, path: Path, cmap: str = "Reds") -> Path | None:
    """Heatmap of ``column`` (a percentage) over setting x bias dimension, one panel per audit.

    Cells without scored associations are grey and marked "n/a"; each cell shows the
    percentage and, below it, the number of significant associations.

    Returns:
        ``path``, or ``None`` when ``agg`` is empty (nothing is drawn).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if not agg:
        return None
    audits = sorted({(r["audit_id"], r["model_id"]) for r in agg})
    dims = _dimensions(agg)
    n = len(audits)
    fig, axes = plt.subplots(
        n, 1, figsize=(1.1 * len(dims) + 3.0, 0.75 * len(_settings(agg)) * n + 1.6 * n), squeeze=False, layout="constrained"
    )
    image = None
    for ax, (audit_id, model_id) in zip(axes[:, 0], audits):
        rows = [r for r in agg if r["audit_id"] == audit_id]
        settings = _settings(rows)
        grid = np.full((len(settings), len(dims)), np.nan)
        counts = np.zeros((len(settings), len(dims)), dtype=int)
        for r in rows:
            i, j = settings.index(r["setting"]), dims.index(r["bias_dimension"] or "(none)")
            counts[i, j] = r["n_significant"]
            if r[column] is not None:
                grid[i, j] = r[column]
        cmap_obj = matplotlib.colormaps[cmap].with_extremes(bad="#dddddd")
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap_obj, vmin=0, vmax=100, aspect="auto")
        ax.set_xticks(range(len(dims)), dims, rotation=35, ha="right")
        ax.set_yticks(range(len(settings)), settings)
        ax.set_title(_panel_label(audit_id, model_id).replace("\n", "  |  "), fontsize=9)
        for i in range(len(settings)):
            for j in range(len(dims)):
                value = grid[i, j]
                text = "n/a" if math.isnan(value) else f"{value:.0f}%"
                if counts[i, j]:
                    text += f"\nn={counts[i, j]}"
                dark = not math.isnan(value) and value > 60
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    fig.suptitle(title, fontsize=11)
    fig.colorbar(image, ax=axes[:, 0].tolist(), label="% of significant associations", shrink=0.8)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def likert_png(likert: list[dict], path: Path) -> Path | None:
    """Stacked horizontal bars: share (%) of each Likert level per bias dimension, one panel per audit.

    Returns:
        ``path``, or ``None`` when no significant association has a bias level.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not likert:
        return None
    audits = sorted({(r["audit_id"], r["model_id"]) for r in likert})
    dims = _dimensions(likert)
    fig, axes = plt.subplots(
        len(audits), 1, figsize=(9, 0.45 * len(dims) * len(audits) + 1.8 * len(audits)), squeeze=False, layout="constrained"
    )
    for ax, (audit_id, model_id) in zip(axes[:, 0], audits):
        rows = [r for r in likert if r["audit_id"] == audit_id]
        totals = {d: sum(r["n_associations"] for r in rows if (r["bias_dimension"] or "(none)") == d) for d in dims}
        left = [0.0] * len(dims)
        for level in LIKERT:  # shares from agg_likert_by_dimension (computed in dbt)
            pct = {(r["bias_dimension"] or "(none)"): r["pct_of_dimension"] for r in rows if r["bias_level"] == level}
            share = [pct.get(d, 0.0) for d in dims]
            ax.barh(dims, share, left=left, color=LIKERT_COLOURS[level], label=LIKERT[level], edgecolor="white")
            for k, (x0, w) in enumerate(zip(left, share)):
                if w >= 8:
                    ax.text(x0 + w / 2, k, f"{w:.0f}", ha="center", va="center", fontsize=7)
            left = [a + b for a, b in zip(left, share)]
        ax.set_yticks(range(len(dims)), [f"{d} (n={totals[d]})" for d in dims])
        ax.set_xlim(0, 100)
        ax.set_xlabel("% of judged significant associations")
        ax.invert_yaxis()
        ax.set_title(_panel_label(audit_id, model_id).replace("\n", "  |  "), fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, ncol=5, fontsize=8, loc="outside lower center", frameon=False)
    fig.suptitle("LLM-judge bias level (Likert 1-5) of significant associations per bias dimension", fontsize=11)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


class _Html(str):
    """A table cell that is already HTML (a drill-down link)."""


def _fmt(value) -> str:
    if isinstance(value, _Html):
        return value
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-3 and value != 0 else f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


def _html_table(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return "<p class='empty'>nothing to show</p>"
    columns = columns or list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(
            f"<td>{r.get(c) if isinstance(r.get(c), _Html) else html.escape(_fmt(r.get(c)))}</td>" for c in columns
        ) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; }
th { background: #f3f3f3; } img { max-width: 100%; } .note, .empty { color: #666; font-size: 0.9em; }
"""


def write_report(
    out_dir: str | Path | None = None, *, audit_id: str | None = None, top: int = 15,
    sections: Sequence[Callable[[str | None, Path], str]] = (),
) -> Path:
    """Write ``index.html`` and its PNGs into ``out_dir``.

    Args:
        out_dir: output folder (default ``$DORA_HOME/reports/<audit id or 'all'>``), created.
        audit_id: only this audit (default: every audit).
        top: rows of the most toxic / highest-rated tables.
        sections: the other probe families' HTML sections, ``(audit_id, out_dir) -> html``,
            appended in order (the caller passes them: this module knows no other family).

    Returns:
        Path of ``index.html``. With no significant association the report says so and
        has no figures.

    Raises:
        LookupError: the score marts are not built yet. WarehouseMissingError: no warehouse.
    """
    from ingestion.landing import safe_path_component

    out = Path(out_dir) if out_dir else dora_home() / "reports" / (safe_path_component(audit_id) if audit_id else "all")
    out.mkdir(parents=True, exist_ok=True)
    data = load_report_data(audit_id, top=top)
    figures = [
        heatmap_png(data["agg"], "pct_negative", "% negative sentiment of significant associations (setting x bias dimension)", out / "pct_negative.png", "Reds"),
        heatmap_png(data["agg"], "pct_toxic", "% toxic significant associations (setting x bias dimension)", out / "pct_toxic.png", "Purples"),
    ]
    figs_html = "".join(f"<p><img src='{p.name}' alt='{p.stem}'></p>" for p in figures if p is not None)
    # --- judge reliability next to the Likert bars; drill-down links -----------------
    from analytics.drilldown import judge_reliability_html, write_drilldown

    likert_path = likert_png(data["likert"], out / "likert_by_dimension.png")
    if likert_path is not None:
        figs_html += f"<p><img src='{likert_path.name}' alt='{likert_path.stem}'></p>"
        figs_html += "<h3>Judge reliability</h3>" + judge_reliability_html(audit_id)
    links = write_drilldown(out, audit_id)
    for row in data["toxic"] + data["rated"]:
        href = links.get((row["audit_id"], row["modality"], row["setting"], row["descriptor"], row["word"]))
        row["samples"] = _Html(f"<a class='samples' href='{html.escape(href)}'>samples</a>") if href else None
    # --- end of the section ------------------------------------------------------------------
    scorers = data["overview"][0] if data["overview"] else {}
    agg_cols = ["audit_id", "modality", "setting", "bias_dimension", "n_significant", "pct_negative", "pct_toxic",
                "pct_likert_1", "pct_likert_2", "pct_likert_3", "pct_likert_4", "pct_likert_5", "mean_bias_level"]
    # one audit: its id and model are in the Audits table, not repeated on every row
    top_rows = data["toxic"] + data["rated"]
    top_cols = list(top_rows[0]) if top_rows else None
    if top_cols and len(data["overview"]) == 1:
        top_cols = [c for c in top_cols if c not in ("audit_id", "model_id")]
    if len(data["overview"]) == 1:
        agg_cols = [c for c in agg_cols if c != "audit_id"]
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>dora report{' - ' + html.escape(audit_id) if audit_id else ''}</title>
<style>{_CSS}</style></head><body>
<h1>dora: sentiment, toxicity and bias levels of significant associations</h1>
<p class="note">Generated {now} from {html.escape(str(dora_home() / 'warehouse.duckdb'))}
(relations agg_bias_by_dimension, fct_association_scores). Significant: Fisher's exact test,
Benjamini-Hochberg q &lt; 0.05. Sentiment scorer: {html.escape(str(scorers.get('sentiment_scorer') or '–'))};
toxicity scorer: {html.escape(str(scorers.get('toxicity_scorer') or '–'))};
judge: {html.escape(str(scorers.get('judge_model') or '–'))}, answer mode {html.escape(str(scorers.get('judge_answer_mode') or '–'))}
(5-point Likert, the BiasDora judge prompt; 'free' = the paper's protocol, 'constrained' = first token restricted to 1-5).</p>
<h2>Audits</h2>
{_html_table(data["overview"], ["audit_id", "model_id", "model_version", "n_significant", "pct_negative", "pct_toxic", "mean_bias_level", "judge_answer_mode"])}
{"<p class='empty'>No significant associations yet: more runs or descriptors give Fisher's test more power.</p>" if not data["agg"] else ""}
<h2>Figures</h2>
<p class="note">Heatmap cells: % of the significant associations of that setting and bias dimension
(n = how many); grey "n/a": no significant association there.</p>
{figs_html or "<p class='empty'>no figures: nothing has been scored</p>"}
<p><a href="samples/index.html">Every significant association and the samples behind it</a> (drill-down pages).</p>
<h2>Most toxic significant associations</h2>
{_html_table(data["toxic"], top_cols)}
<h2>Highest-rated significant associations (LLM judge)</h2>
{_html_table(data["rated"], top_cols)}
<h2>By setting and bias dimension (agg_bias_by_dimension)</h2>
{_html_table(data["agg"], agg_cols)}
{"".join(section(audit_id, out) for section in sections)}
</body></html>
"""
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index

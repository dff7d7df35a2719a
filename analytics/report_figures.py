"""The figures of ``dora report``'s index (``analytics/report.py`` lays the page out): the
heatmaps of a share over setting x bias dimension and the Likert bars, one panel per audit, and
the heatmap numbers' shares with their intervals. Every number comes from the marts the caller
read (``agg_bias_by_dimension``, ``agg_likert_by_dimension``); this module only draws them.

Intervals: Wilson's score interval of a share k / n (E. B. Wilson, JASA 22, 1927; statsmodels
``proportion_confint(method="wilson")``, through :func:`analytics.version_data.share`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

__all__ = ["LIKERT", "LIKERT_COLOURS", "SETTING_ORDER", "audits_without", "dumbbell_png", "heatmap_png", "likert_png"]

#: Display order of settings (T2T first, as in the paper) and Likert labels (docs/method.md#4-scoring).
SETTING_ORDER = ("singular", "plural", "adjective", "noun", "verb")
LIKERT = {1: "1 Not at all", 2: "2 Slightly", 3: "3 Moderately", 4: "4 Highly", 5: "5 Extremely"}
LIKERT_COLOURS = {1: "#1a9850", 2: "#a6d96a", 3: "#fee08b", 4: "#f46d43", 5: "#a50026"}


def _drawn_audits(rows: list[dict], count: str) -> list[tuple[str, str]]:
    """The (audit, model) panels worth drawing: those with a row whose ``count`` is above 0.

    An audit without any (no significant association, or none judged) would be a panel of empty
    grey cells; the page says so in words instead (:func:`audits_without`).
    """
    return sorted({(r["audit_id"], r["model_id"]) for r in rows if (r[count] or 0) > 0})


def audits_without(rows: list[dict], count: str) -> list[str]:
    """The audits of ``rows`` whose every row has ``count`` 0 (nothing to draw for them), sorted."""
    drawn = {a for a, _ in _drawn_audits(rows, count)}
    return sorted({r["audit_id"] for r in rows} - drawn)


def _panel_label(audit_id: str, model_id: str) -> str:
    return f"{model_id.split('/')[-1]}\n{audit_id}"


def _settings(rows: list[dict]) -> list[str]:
    found = {r["setting"] for r in rows}
    return [s for s in SETTING_ORDER if s in found] + sorted(found - set(SETTING_ORDER))


def _dimensions(rows: list[dict], audited: dict[str, list[str]] | None = None) -> list[str]:
    """The columns of a panel: every dimension with a row, plus every audited one (empty columns)."""
    found = {r["bias_dimension"] or "(none)" for r in rows}
    for dims in (audited or {}).values():
        found.update(dims)
    return sorted(found)


def heatmap_png(
    agg: list[dict],
    column: str,
    title: str,
    path: Path,
    cmap: str = "Reds",
    audited: dict[str, list[str]] | None = None,
    denominator: str | None = None,
) -> Path | None:
    """Heatmap of ``column`` (a percentage) over setting x bias dimension, one panel per audit.

    Cells without scored associations are grey and marked "n/a"; each cell shows the
    percentage and, below it, the number of significant associations (``n=0`` in an audited
    dimension without any: every dimension of ``audited``, ``{audit_id: dimensions}``, gets a
    column). An audit without any significant association gets no panel (:func:`audits_without`).

    With ``denominator`` (the mart column the percentage is of, e.g. ``n_sentiment_scored``) a
    cell shows the share as k/n with its 95% Wilson interval (:func:`analytics.version_data.share`),
    and its colour is as strong as the interval is narrow (opacity 1 - interval width), so a
    cell of one association (1/1: [21-100]) is pale however high its share.

    Returns:
        ``path``, or ``None`` when no audit of ``agg`` has a significant association (nothing is drawn).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    audits = _drawn_audits(agg, "n_significant")
    if not audits:
        return None
    agg = [r for r in agg if (r["audit_id"], r["model_id"]) in audits]
    dims = _dimensions(agg, {a: d for a, d in (audited or {}).items() if a in {x for x, _ in audits}})
    n = len(audits)
    fig, axes = plt.subplots(n, 1, figsize=(1.1 * len(dims) + 3.0, 0.75 * len(_settings(agg)) * n + 1.6 * n), squeeze=False, layout="constrained")
    image = None
    for ax, (audit_id, model_id) in zip(axes[:, 0], audits, strict=True):
        rows = [r for r in agg if r["audit_id"] == audit_id]
        settings = _settings(rows)
        grid, counts = _panel_grid(rows, settings, dims, column)
        cmap_obj = matplotlib.colormaps[cmap].with_extremes(bad="#dddddd")
        shares = _panel_shares(rows, settings, dims, column, denominator) if denominator is not None else {}
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap_obj, vmin=0, vmax=100, aspect="auto")
        if shares:
            # the colour of a share weighs by how much its n pins it down: opacity 1 - Wilson interval width over white
            rgba = cmap_obj(np.ma.masked_invalid(grid) / 100.0)
            for (i, j), s in shares.items():
                weight = 1.0 - (s.hi - s.lo)
                rgba[i, j, :3] = weight * rgba[i, j, :3] + (1.0 - weight) * 1.0
            ax.imshow(rgba, aspect="auto")
        ax.set_xticks(range(len(dims)), dims, rotation=35, ha="right")
        ax.set_yticks(range(len(settings)), settings)
        ax.set_title(_panel_label(audit_id, model_id).replace("\n", "  |  "), fontsize=9)
        _label_cells(ax, grid, counts, shares)
    fig.suptitle(title, fontsize=11)
    fig.colorbar(image, ax=axes[:, 0].tolist(), label="% of significant associations", shrink=0.8)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _panel_grid(rows: list[dict], settings: list[str], dims: list[str], column: str):
    """(the panel's percentages, NaN where none; its counts of significant associations), both
    shaped (settings, bias dimensions)."""
    import numpy as np

    grid = np.full((len(settings), len(dims)), np.nan)
    counts = np.zeros((len(settings), len(dims)), dtype=int)
    for r in rows:
        i, j = settings.index(r["setting"]), dims.index(r["bias_dimension"] or "(none)")
        counts[i, j] = r["n_significant"] or 0
        if r[column] is not None:
            grid[i, j] = r[column]
    return grid, counts


def _panel_shares(rows: list[dict], settings: list[str], dims: list[str], column: str, denominator: str) -> dict:
    """(setting index, dimension index) -> the cell's share k/n with its 95% Wilson interval
    (:func:`analytics.version_data.share`), for the cells with a value and a non-zero ``denominator``."""
    from analytics.version_data import share

    shares = {}
    for r in rows:
        if r[column] is not None and r[denominator]:
            n_scored = int(r[denominator])
            shares[(settings.index(r["setting"]), dims.index(r["bias_dimension"] or "(none)"))] = share(round(r[column] * n_scored / 100), n_scored)
    return shares


def _label_cells(ax, grid, counts, shares: dict) -> None:
    """Write each cell's percentage (and interval, k/n) and its count; white on dark cells."""
    rows, cols = grid.shape
    for i in range(rows):
        for j in range(cols):
            value = grid[i, j]
            text = "n/a" if math.isnan(value) else f"{value:.0f}%"
            s = shares.get((i, j))
            if s is not None:
                text += f" [{100 * s.lo:.0f}-{100 * s.hi:.0f}]\n{s.k}/{s.n} (n={counts[i, j]})"
            else:
                text += f"\nn={counts[i, j]}"
            dark = not math.isnan(value) and value > 60 and (s is None or s.hi - s.lo < 0.4)
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")


def likert_png(likert: list[dict], path: Path, audited: dict[str, list[str]] | None = None) -> Path | None:
    """Stacked horizontal bars: share (%) of each Likert level per bias dimension, one panel per audit.

    Every dimension of ``audited`` (``{audit_id: dimensions}``) has a bar, empty with ``n=0``
    when none of its significant associations was judged; an audit with no judged significant
    association gets no panel.

    Returns:
        ``path``, or ``None`` when no significant association has a bias level.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    audits = _drawn_audits(likert, "n_associations")
    if not audits:
        return None
    likert = [r for r in likert if (r["audit_id"], r["model_id"]) in audits]
    dims = _dimensions(likert, {a: d for a, d in (audited or {}).items() if a in {x for x, _ in audits}})
    fig, axes = plt.subplots(len(audits), 1, figsize=(9, 0.45 * len(dims) * len(audits) + 1.8 * len(audits)), squeeze=False, layout="constrained")
    for ax, (audit_id, model_id) in zip(axes[:, 0], audits, strict=True):
        rows = [r for r in likert if r["audit_id"] == audit_id]
        # a dimension with no judged association has a row with no level and no share: an empty bar
        totals = {d: sum(r["n_associations"] or 0 for r in rows if (r["bias_dimension"] or "(none)") == d) for d in dims}
        left = [0.0] * len(dims)
        for level in LIKERT:  # shares from agg_likert_by_dimension (computed in dbt)
            pct = {(r["bias_dimension"] or "(none)"): r["pct_of_dimension"] for r in rows if r["bias_level"] == level}
            share = [pct.get(d) or 0.0 for d in dims]
            ax.barh(dims, share, left=left, color=LIKERT_COLOURS[level], label=LIKERT[level], edgecolor="white")
            for k, (x0, w) in enumerate(zip(left, share, strict=True)):
                if w >= 8:
                    ax.text(x0 + w / 2, k, f"{w:.0f}", ha="center", va="center", fontsize=7)
            left = [a + b for a, b in zip(left, share, strict=True)]
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


def _with_intervals(row: dict) -> dict:
    """A row of agg_bias_by_dimension with its two heatmap shares as ``"83% [44-97] 5/6"`` (the
    share, its 95% Wilson interval, k/n: :func:`analytics.version_data.share`; the count is the
    mart's percentage x its denominator / 100, exact as the percentage is 100 k / n), in
    ``pct_negative_ci`` and ``pct_toxic_ci``."""
    from analytics.version_data import share

    out = dict(row)
    for name, pct, n in (
        ("pct_negative_ci", "pct_negative_association", "n_sentiment_baselined"),
        ("pct_toxic_ci", "pct_toxic_association", "n_toxicity_baselined"),
    ):
        if row.get(pct) is None or not row.get(n):
            out[name] = None
            continue
        s = share(round(row[pct] * row[n] / 100), row[n])
        value, lo, hi = s.estimate()
        out[name] = f"{100 * value:.0f}% [{100 * lo:.0f}-{100 * hi:.0f}] {s.k}/{s.n}"
    return out


def dumbbell_png(data: dict, before: Mapping, after: Mapping, dims: list[str], path: Path) -> Path | None:
    """Before/after plot: per bias dimension (rows) and measure (panels: % negative, % toxic,
    % bias level 4-5), the share of ``before`` and of ``after`` with their 95% Wilson intervals,
    joined by a line.

    Returns:
        ``path``, or ``None`` when ``dims`` is empty.
    """
    import matplotlib

    from analytics.version_data import dimension_shares, version_label

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not dims:
        return None
    names = list(dimension_shares(data, after["audit_id"], dims[0]))
    fig, axes = plt.subplots(1, len(names), figsize=(11, 0.55 * len(dims) + 1.8), sharey=True, squeeze=False, layout="constrained")
    colours = {"before": "#4575b4", "after": "#d73027"}
    for ax, name in zip(axes[0], names, strict=True):
        for y, dim in enumerate(dims):
            pair = {"before": dimension_shares(data, before["audit_id"], dim)[name], "after": dimension_shares(data, after["audit_id"], dim)[name]}
            points = [(which, s) for which, s in pair.items() if s.n]
            if len(points) == 2:
                ax.plot([100 * pair["before"].estimate()[0], 100 * pair["after"].estimate()[0]], [y, y], color="#999999", lw=1.5, zorder=1)
            for which, s in points:
                value, lo, hi = s.estimate()
                offset = -0.12 if which == "before" else 0.12
                # max(0, ...): at k = n the upper bound is 1 up to rounding, a hair below the share
                ax.errorbar(
                    100 * value,
                    y + offset,
                    xerr=[[max(0.0, 100 * (value - lo))], [max(0.0, 100 * (hi - value))]],
                    fmt="o",
                    color=colours[which],
                    ms=5,
                    capsize=2,
                    lw=1,
                    zorder=2,
                )
                ax.text(100 * hi + 1.5, y + offset, f"{s.k}/{s.n}", fontsize=6, va="center", color=colours[which])
        ax.set_xlim(0, 112)
        ax.set_xticks(range(0, 101, 25))
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("% of significant associations (95% Wilson interval)", fontsize=7)
        ax.grid(axis="x", color="#eeeeee")
    axes[0, 0].set_yticks(range(len(dims)), dims)
    axes[0, 0].set_ylim(len(dims) - 0.5, -0.5)
    handles = [
        plt.Line2D([], [], color=colours[w], marker="o", ls="", label=f"{w}: {version_label(a)}") for w, a in (("before", before), ("after", after))
    ]
    fig.legend(handles=handles, ncol=2, fontsize=8, loc="outside lower center", frameon=False)
    fig.suptitle(f"{after['modality']}: {version_label(before)} -> {version_label(after)}", fontsize=10)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path

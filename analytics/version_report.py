"""Version pages of ``dora report``: a target's BiasDora audits side by side, in version order.

One page per target (``dim_audits.target``: the registry target, or for an ad-hoc audit its
model id) that has a BiasDora audit, ``versions/<target>.html`` in the report folder:

* every audit of the target in version order (``audit_seq``, the finished audits of the target
  in start order), with its T2T parse rate (``agg_biasdora_audits``: completions parsed of
  completions landed) and the LLM judge's answers that gave no rating (``agg_judge_parse_rates``:
  no_rating / ambiguous / out_of_range / empty / error);
* per bias dimension and audit: the significant associations, % negative, % toxic and the mix
  of Likert bias levels (docs/method.md#4-scoring), every share with its count, its n and a
  95% Wilson score interval; an audit without a significant association says so in words;
* for the last two finished audits of each modality: a before/after (dumbbell) plot of % negative,
  % toxic and % rated 4-5 (the "extreme" band) per bias dimension with their intervals, the
  same numbers in a table beside it with the 95% interval of each difference, the changes
  per bias dimension (``agg_association_changes_by_dimension``) and the associations that
  changed (``fct_association_changes``), worst first.

Every count comes from a mart, read-only with ``?`` parameters (:func:`analytics.query.execute_query`);
per-dimension numbers only from the per-dimension marts ``agg_bias_by_dimension`` (summed over
settings: an association is one row of one setting) and ``agg_likert_by_dimension``. The marts
give the shares negative / toxic as percentages of a denominator they also give, so the count
is ``pct x n / 100`` (exact: ``pct`` is ``100 k / n``).

The numbers, their queries and their intervals (Wilson, Newcombe): ``analytics/version_data.py``.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from analytics.drift import DriftResult
from analytics.drift_html import drift_html, other_families_html
from analytics.query import format_q
from analytics.report_figures import dumbbell_png
from analytics.version_data import (
    NO_RATING,
    Share,
    changes,
    difference_interval,
    dimension_shares,
    load_version_data,
    share,
    version_label,
    version_targets,
)

__all__ = ["VersionPage", "page_name", "share_cell", "write_version_page", "write_version_pages"]


def _pct(x: float) -> str:
    return f"{100 * x:.0f}"


def share_cell(s: Share, *, tag: str = "td") -> str:
    """One table cell: ``"83% [44-97] 5/6"``; the exact numbers in ``data-k``, ``data-n``,
    ``data-lo`` and ``data-hi`` (fractions); ``n/a`` when n = 0."""
    if not s.n:
        return f"<{tag} class='share' data-k='0' data-n='0'>n/a <span class='n'>n=0</span></{tag}>"
    value, lo, hi = s.estimate()
    return (
        f"<{tag} class='share' data-k='{s.k}' data-n='{s.n}' data-lo='{lo!r}' data-hi='{hi!r}'>"
        f"{_pct(value)}% <span class='ci'>[{_pct(lo)}&ndash;{_pct(hi)}]</span> "
        f"<span class='n'>{s.k}/{s.n}</span></{tag}>"
    )


def _cell(value) -> str:
    if value is None:
        return "<td>n/a</td>"
    if isinstance(value, float):
        return f"<td>{value:.3g}</td>"
    return f"<td>{html.escape(str(value))}</td>"


def _table(head: list[str], rows: list[str], cls: str = "") -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return f"<div class='table-wrap'><table class='{cls}'><thead><tr>{th}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def _ranges(values) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``."""
    spans: list[list[int]] = []  # [first, last] of each span of consecutive values
    for v in sorted(values or []):
        if spans and spans[-1][1] == v - 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "none"


def probe_configuration(profile: Mapping | None) -> str:
    """One audit's probe configuration in words (``agg_audit_probe_profiles``):
    ``"singular; 4 descriptors; letters x; runs 1-16; 64 probe rows"``."""
    if profile is None:
        return "no probe row in the warehouse"
    parts = [", ".join(profile["settings"]), f"{profile['descriptors']} descriptors"]
    if profile["letters"]:
        parts.append(f"letters {''.join(profile['letters'])}")
    if profile["runs"]:
        parts.append(f"runs {_ranges(profile['runs'])}")
    return "; ".join(parts + [f"{profile['probe_rows']:,} probe rows"])


def _audits_html(data: dict) -> str:
    rows = []
    for a in data["audits"]:
        t2t = share(a["completions_parsed"], a["completions"]) if a["completions"] else None
        config = probe_configuration(data["profiles"].get((a["audit_id"], a["modality"])))
        rows.append(
            f"<tr data-audit='{html.escape(a['audit_id'])}'>{_cell(a['audit_seq'] if a['audit_seq'] is not None else '-')}"
            f"{_cell(a['audit_id'])}{_cell(a['model_version'])}{_cell(a['modality'])}"
            f"<td class='probe-config' data-config-hash='{html.escape(str(a['config_hash']))}'>{html.escape(config)}</td>{_cell(a['status'])}"
            f"{_cell(str(a['started_at'])[:16] if a['started_at'] else None)}"
            f"{_cell(a['significant_associations'])}"
            + (share_cell(t2t).replace("class='share'", "class='share parse-rate'") if t2t else "<td>n/a</td>")
            + "</tr>"
        )
    return _table(
        [
            "#",
            "audit",
            "model version",
            "modality",
            "probe configuration",
            "status",
            "started (UTC)",
            "significant associations",
            "T2T completions parsed [95% CI]",
        ],
        rows,
        "audits",
    )


def _judge_html(data: dict) -> str:
    if data["judge"] is None:
        return "<p class='empty'>The judge's parse rates (agg_judge_parse_rates) are not built yet: no judge ran.</p>"
    if not data["judge"]:
        return "<p class='empty'>No judge answer landed for these audits.</p>"
    seq = {a["audit_id"]: a for a in data["audits"]}
    rows = []
    for j in data["judge"]:
        unrated = sum(j[c] or 0 for c in NO_RATING)
        rows.append(
            f"<tr data-audit='{html.escape(j['audit_id'])}'>{_cell(version_label(seq[j['audit_id']]))}{_cell(j['judge'])}"
            f"{_cell(j['answers'])}{share_cell(share(j['parsed'], j['answers']))}<td class='no-answer'>{unrated}</td>"
            + "".join(_cell(j[c]) for c in NO_RATING)
            + "</tr>"
        )
    return _table(
        ["version", "judge", "answers", "rated [95% CI]", "no rating (all)", "no_rating", "ambiguous", "out_of_range", "empty", "error"],
        rows,
        "judge-answers",
    )


def _dimensions_html(data: dict, audits: list[dict]) -> str:
    """Per bias dimension, one row per audit in version order; an audit with no significant
    association is named in a sentence instead of a row of empty cells."""
    empty = [a for a in audits if not a["significant_associations"]]
    shown = [a for a in audits if a["significant_associations"]]
    out = "".join(
        f"<p class='no-significant' data-audit='{html.escape(a['audit_id'])}'>{html.escape(version_label(a))} "
        f"({html.escape(a['audit_id'])}, {html.escape(a['modality'])}): no significant association "
        "(Fisher's exact test, BH q &lt; 0.05), so no share to show per bias dimension.</p>"
        for a in empty
    )
    if not shown:
        return out
    dims = sorted({d for (aid, d) in data["dimensions"] if aid in {a["audit_id"] for a in shown}})
    rows = []
    for dim in dims:
        for i, a in enumerate(shown):
            d = data["dimensions"].get((a["audit_id"], dim)) or {}
            levels = data["likert"].get((a["audit_id"], dim), {})
            judged = sum(levels.values())
            head = f"<th rowspan='{len(shown)}' scope='rowgroup'>{html.escape(dim)}</th>" if i == 0 else ""
            n_sig = d.get("n_significant") or 0
            cells = (
                share_cell(share(d.get("n_negative"), d.get("n_sentiment_scored")))
                + share_cell(share(d.get("n_toxic"), d.get("n_toxicity_scored")))
                + "".join(share_cell(share(levels.get(k, 0), judged)) for k in range(1, 6))
            )
            rows.append(
                f"<tr data-audit='{html.escape(a['audit_id'])}' data-dimension='{html.escape(dim)}'>{head}"
                f"{_cell(version_label(a))}<td class='n-significant'>{n_sig}</td>{cells}"
                f"<td class='no-answer'>{n_sig - judged}</td></tr>"
            )
    return out + _table(
        ["bias dimension", "version", "significant", "% negative", "% toxic", "level 1", "level 2", "level 3", "level 4", "level 5", "no bias level"],
        rows,
        "by-dimension",
    )


def _pair_html(data: dict, modality: str, before: dict, after: dict, out_dir: Path, stem: str, links: Mapping[tuple, str]) -> str:
    """The before/after section of one modality's last two audits."""
    dims = sorted({d for (aid, d) in data["dimensions"] if aid in (before["audit_id"], after["audit_id"])})
    title = f"{html.escape(modality)}: {html.escape(version_label(before))} &rarr; {html.escape(version_label(after))}"
    parts = [f"<h2 id='pair-{html.escape(modality)}'>Last two comparable versions, {title}</h2>"]
    parts.append(
        "<p class='note'>Both audits probed the same rows (agg_audit_probe_profiles: the same probe configuration), "
        "so every share below is counted on the same prompts.</p>"
    )
    rows, excluding_zero, left_out, compared = _share_rows(data, before, after, dims)
    parts += _verdict_lines(len(rows), excluding_zero, left_out, compared)
    # no share to compare: a plot would be empty axes under a sentence that says so
    png = dumbbell_png(data, before, after, dims, out_dir / f"{stem}-{modality}-dumbbell.png") if compared else None
    if png is not None:
        parts.append(
            f"<div class='figure'><img src='{html.escape(png.name)}' alt='before and after per bias dimension, {html.escape(modality)}'></div>"
        )
    parts.append(
        "<p class='note'>The numbers of the plot: each share with its 95% Wilson interval and k/n; the "
        "difference (after - before, percentage points) with Newcombe's 95% interval.</p>"
    )
    parts.append(
        _table(
            ["bias dimension", "measure", f"before ({version_label(before)})", f"after ({version_label(after)})", "difference [95% CI]"],
            rows,
            "before-after",
        )
    )
    parts.append(_changes_html(before, after, links))
    return "".join(parts)


def _share_rows(data: dict, before: dict, after: dict, dims: list[str]):
    """(one table row per (bias dimension, measure) with both shares and their difference;
    the rows whose difference's 95% interval excludes 0; those that cannot be compared; how
    many were compared)."""
    rows, excluding_zero, left_out, compared = [], [], [], 0
    for dim in dims:
        b, a = dimension_shares(data, before["audit_id"], dim), dimension_shares(data, after["audit_id"], dim)
        for name in a:
            diff = difference_interval(a[name], b[name])
            if diff is None:
                left_out.append(f"{dim} {name}")
                diff_cell = "<td class='difference'>n/a</td>"
            else:
                compared += 1
                point = a[name].estimate()[0] - b[name].estimate()[0]
                includes_zero = diff[0] <= 0 <= diff[1]
                if not includes_zero:
                    excluding_zero.append(f"{dim} {name}")
                diff_cell = (
                    f"<td class='difference' data-lo='{diff[0]!r}' data-hi='{diff[1]!r}' "
                    f"data-includes-zero='{str(includes_zero).lower()}'>{100 * point:+.0f} points "
                    f"<span class='ci'>[{100 * diff[0]:+.0f}, {100 * diff[1]:+.0f}]</span></td>"
                )
            rows.append(
                f"<tr data-dimension='{html.escape(dim)}' data-measure='{html.escape(name)}'>"
                f"{_cell(dim)}{_cell(name)}{share_cell(b[name])}{share_cell(a[name])}{diff_cell}</tr>"
            )
    return rows, excluding_zero, left_out, compared


def _verdict_lines(n_rows: int, excluding_zero: list[str], left_out: list[str], compared: int) -> list[str]:
    """The section's verdict sentence, and the rows it leaves out when it is about some of them."""
    parts = []
    if not compared:
        verdict = "No share can be compared: one of the two audits has no scored significant association."
    elif not excluding_zero:
        verdict = f"Every difference's 95% interval includes 0 ({compared} of {n_rows} compared): no detectable change of a compared share."
    else:
        verdict = (
            f"{len(excluding_zero)} of {compared} compared differences (of {n_rows}) have a 95% interval excluding 0: "
            + html.escape(", ".join(excluding_zero))
            + "."
        )
    parts.append(f"<p class='verdict'>{verdict}</p>")
    if compared and left_out:
        # a headline over some of the rows names the others, so "no change" is not read as "no change anywhere"
        parts.append(
            f"<p class='left-out'>Left out of that sentence: {len(left_out)} of {n_rows} rows, where an audit has no "
            "significant association with that score (n = 0): " + html.escape(", ".join(left_out)) + ".</p>"
        )
    return parts


def _changes_html(before: dict, after: dict, links: Mapping[tuple, str]) -> str:
    """The changes per bias dimension and the associations that changed (fct_association_changes)."""
    parts = []
    found = changes(before["audit_id"], after["audit_id"])
    if found is None:
        parts.append("<p class='empty'>The change marts (fct_association_changes) are not built yet.</p>")
        return "".join(parts)
    per_dimension, listed = found
    parts.append("<h3>Changes per bias dimension, worst first (agg_association_changes_by_dimension)</h3>")
    parts.append(
        _table(
            [
                "bias dimension",
                "compared",
                "significant changes",
                "new",
                "strengthened",
                "weakened",
                "gone",
                "unchanged",
                "net change",
                "direction",
                "min change q",
            ],
            [
                f"<tr data-dimension='{html.escape(r['bias_dimension'])}'>{_cell(r['bias_dimension'])}{_cell(r['associations_compared'])}"
                f"{_cell(r['significant_changes'])}{_cell(r['new_associations'])}{_cell(r['strengthened'])}{_cell(r['weakened'])}"
                f"{_cell(r['gone_associations'])}{_cell(r['unchanged'])}{_cell(r['net_change'])}{_cell(r['direction'])}"
                f"<td>{format_q(r['min_change_q'])}</td></tr>"
                for r in per_dimension
            ],
            "changes-by-dimension",
        )
    )
    changed = [r for r in listed if r["change_type"] != "unchanged"]
    parts.append("<h3>Associations that changed, worst first (fct_association_changes)</h3>")
    unchanged = len(listed) - len(changed)
    parts.append(
        f"<p class='note'>{len(listed)} associations significant in either audit were tested "
        f"(two-sided Fisher's exact test on their tf, BH q &lt; 0.05); {unchanged} did not change detectably.</p>"
    )
    if not changed:
        parts.append("<p class='empty'>No association changed significantly.</p>")
        return "".join(parts)
    parts.append(_changed_associations_table(changed, before, after, links))
    return "".join(parts)


def _changed_associations_table(changed: list[dict], before: dict, after: dict, links: Mapping[tuple, str]) -> str:
    """The table of the associations that changed, each linked to its samples."""
    rows = []
    for r in changed:
        audit = after if r["change_type"] != "gone" else before
        href = links.get((audit["audit_id"], r["modality"], r["setting"], r["descriptor"], r["word"]))
        name = html.escape(f"{r['descriptor']} : {r['word']}")
        link = f"<a href='../{html.escape(href)}'>{name}</a>" if href else name
        rows.append(
            f"<tr class='change' data-change='{html.escape(r['change_type'])}'>{_cell(r['change_type'])}<td>{link}</td>"
            f"{_cell(r['bias_dimensions'])}{_cell(r['setting'])}{_cell(r['tf_before'])}{_cell(r['tf_after'])}"
            f"<td>{format_q(r['fisher_q_before'])}</td><td>{format_q(r['fisher_q_after'])}</td>"
            f"<td>{format_q(r['change_q'])}</td>{_cell(r['bias_level_before'])}{_cell(r['bias_level_after'])}</tr>"
        )
    return _table(
        [
            "change",
            "association",
            "bias dimensions",
            "setting",
            "tf before",
            "tf after",
            "Fisher q before",
            "Fisher q after",
            "change q",
            "bias level before",
            "bias level after",
        ],
        rows,
        "changed-associations",
    )


CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { font-size: 1em; }
.table-wrap { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.share { white-space: nowrap; } .ci, .n { color: #666; font-size: 0.9em; }
img { max-width: 100%; } .note, .empty { color: #666; font-size: 0.9em; } .verdict { font-weight: 600; }
"""


def page_name(target: str) -> str:
    """File name of a target's version page: a readable, path-safe prefix and a short hash
    (two targets never share a page, whatever characters their names hold)."""
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in target).lstrip(".")[:60]
    return f"{keep}-{hashlib.blake2b(target.encode(), digest_size=4).hexdigest()}.html"


def _unpaired_html(data: dict) -> str:
    """The audits left out of the before/after view: no earlier audit probed their rows."""
    if not data["unpaired"]:
        return ""
    items = "".join(
        f"<li data-audit='{html.escape(a['audit_id'])}'>{html.escape(modality)}: {html.escape(version_label(a))} "
        f"({html.escape(probe_configuration(data['profiles'].get((a['audit_id'], modality))))})</li>"
        for modality, a in data["unpaired"]
    )
    return (
        "<p class='unpaired'>Left out of the before/after view: no earlier audit of the target probed the same rows "
        "as these (another probe configuration); <code>dora diff --from A --to B</code> compares two of them on "
        f"the rows both probed and says what it left out.</p><ul class='unpaired'>{items}</ul>"
    )


def _biasdora_section(data: dict, folder: Path, stem: str, links: Mapping[tuple, str], drift: Sequence[DriftResult] | None = None) -> str:
    """The family's part of the version page (``<section data-family=...>``): its audits with
    their probe configurations, the judge's answers, the shares per bias dimension and, per
    modality, the last two comparable versions. One section per family, so a family-level line
    (a check state) has one place to go."""
    pairs = "".join(_pair_html(data, m, b, a, folder, stem, links) for m, b, a in data["pairs"])
    if not data["pairs"]:
        pairs = (
            "<p class='empty'>No before/after view: this target has no two finished BiasDora audits of one modality that probed the same rows.</p>"
        )
    return f"""<section class="family" data-family="{html.escape(data["family"])}">
{drift_html(drift)}
<h2>Audits in version order</h2>
<p class="note">BiasDora's audits of the target only; the probe configuration is what the audit's rows show
(agg_audit_probe_profiles: settings, descriptors, T2T letters and runs); the cell's data-config-hash is the
audit's config hash (dim_audits). Only audits with the same probe rows are compared below.</p>
{_audits_html(data)}
<h2>The judge's answers</h2>
<p class="note">Answers of the LLM judge that gave no Likert rating, by parse status (no_rating: no number or level word;
ambiguous: several levels; out_of_range: numbers outside 1-5); their associations have no bias level.</p>
{_judge_html(data)}
<h2>By bias dimension</h2>
{_dimensions_html(data, data["audits"])}
{pairs}
{_unpaired_html(data)}
</section>"""


@dataclass(frozen=True)
class VersionPage:
    """A written version page: its target, path, BiasDora audits (version order) and the
    latest one's T2T parse rate (``None`` without completions)."""

    target: str
    path: Path
    versions: tuple[str, ...]
    latest_parse_rate: Share | None


def write_version_page(
    target: str,
    out_dir: Path,
    links: Mapping[tuple, str] | None = None,
    *,
    family: str,
    drift: Sequence[DriftResult] | None = None,
) -> VersionPage:
    """Write ``out_dir/versions/<page_name(target)>`` (and its dumbbell PNGs) for one target.

    Args:
        family: the family whose audits the page compares (BiasDora's record passes its name).
        drift: every family's drift results (``analytics.drift.evaluate_drift``): the page shows
            the state of the target's checks in each family's section (:func:`drift_html`).
            None: no drift line.
        links: ``{(audit_id, modality, setting, descriptor, word): href}`` of the drill-down
            pages (relative to ``out_dir``), to link the changed associations.

    Returns:
        The written page (:class:`VersionPage`).

    Raises:
        duckdb.CatalogException: the BiasDora marts are not built. WarehouseMissingError / WarehouseBusyError.
    """
    folder = Path(out_dir) / "versions"
    folder.mkdir(parents=True, exist_ok=True)
    data = load_version_data(target, family)
    path = folder / page_name(target)
    biasdora = data["audits"]
    model = sorted({a["model_id"] for a in biasdora})
    mine = None if drift is None else [r for r in drift if r.target == target and r.family == family]
    section = _biasdora_section(data, folder, path.stem, links or {}, mine) + other_families_html(target, family, drift)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>dora report - versions of {html.escape(target)}</title>
<style>{CSS}</style></head><body>
<p class="pages"><a href="../index.html">report index</a> | <a href="../index.html#versions">every target</a></p>
<h1>Versions of {html.escape(target)} ({html.escape(", ".join(model))})</h1>
<p class="note">Every share is k/n with its 95% Wilson score interval in brackets (statsmodels proportion_confint,
method "wilson"), n its denominator: the significant associations with that score. Source relations: dim_audits,
agg_biasdora_audits, agg_audit_probe_profiles, agg_judge_parse_rates, agg_bias_by_dimension (settings summed), agg_likert_by_dimension,
agg_association_changes_by_dimension, fct_association_changes. Significant: Fisher's exact test, Benjamini-Hochberg
q &lt; 0.05. An association counts under every bias dimension of its descriptor.</p>
{section}
</body></html>
"""
    path.write_text(page, encoding="utf-8")
    latest = biasdora[-1] if biasdora else None
    parse = share(latest["completions_parsed"], latest["completions"]) if latest and latest["completions"] else None
    return VersionPage(target, path, tuple(version_label(a) for a in biasdora), parse)


def write_version_pages(
    out_dir: Path,
    audit_id: str | None = None,
    links: Mapping[tuple, str] | None = None,
    notes: list[str] | None = None,
    *,
    family: str,
    drift: Sequence[DriftResult] | None = None,
) -> list[VersionPage]:
    """Write the version page of every target with an audit of ``family`` (of ``audit_id``'s
    target only, when given).

    Only a page whose file exists once written is returned, so the index never links a page that
    is not there: a target whose page could not be written (its marts not built, an unreadable
    row) is left out and named in one line appended to ``notes``.

    Returns:
        The pages, sorted by target; ``[]`` when ``dim_audits`` is not built (one line in ``notes``).

    Raises:
        WarehouseMissingError / WarehouseBusyError.
    """
    import duckdb

    notes = notes if notes is not None else []
    try:
        targets = version_targets(family, audit_id)
    except duckdb.CatalogException:
        notes.append("no version page: the audit dimension dim_audits is not built (run `dora audit`)")
        return []
    pages = []
    for target in targets:
        try:
            page = write_version_page(target, out_dir, links, family=family, drift=drift)
        except (duckdb.Error, OSError) as exc:  # a mart missing, a file that cannot be written: the other pages still are
            notes.append(f"no version page for target {target!r}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        if not page.path.is_file():
            notes.append(f"no version page for target {target!r}: {page.path} was not written")
            continue
        pages.append(page)
    return pages

"""Drill-down pages of ``dora report``: every significant association -> its samples.

For each (audit, modality, setting) with significant associations (``fct_associations``,
Fisher BH q < 0.05; docs/method.md#3-associations) one offline HTML page
``samples/<audit>/<modality>-<setting>.html`` lists, per association (a section whose id is
:func:`association_anchor`), the samples that produced it, read from the mart
``fct_association_samples``: T2T completions (prompt, raw output, parsed word, parse status,
seed, letter, run) or T2I / I2T descriptions (prompt, description, status, seed) with a
thumbnail of the described image (copied next to the pages, so the report folder is
self-contained), and the LLM judge's answers to the association (raw text, parsed rating, parse
status; ``stg_judge_ratings``), so a bias level can be checked against what the judge wrote. ``samples/index.html`` lists every significant association with its link.
The report's tables link to these sections (:func:`association_href`). Every row comes from
SQL; this module only lays it out. Judge reliability tables (``agg_judge_agreement``,
``agg_judge_parse_rates``) for the report are rendered here too (:func:`judge_reliability_html`).
"""

from __future__ import annotations

import hashlib
import html
from collections import defaultdict
from pathlib import Path

from analytics.query import execute_query, format_q
from ingestion.home import dora_home

__all__ = ["association_anchor", "association_href", "judge_reliability_html", "write_drilldown"]

THUMBNAIL_PX = 160


def _safe(text: str) -> str:
    """A file-name-safe, collision-free component: readable prefix + short hash."""
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:60]
    return f"{keep}-{hashlib.blake2b(text.encode(), digest_size=4).hexdigest()}"


def association_anchor(modality: str, setting: str, descriptor: str, word: str) -> str:
    """HTML id of an association's section (stable: a hash of its key)."""
    key = "\x1f".join([modality, setting, descriptor, word])
    return "a-" + hashlib.blake2b(key.encode(), digest_size=6).hexdigest()


def page_path(audit_id: str, modality: str, setting: str) -> str:
    """Relative path (from the report folder) of the page of one (audit, modality, setting)."""
    return f"samples/{_safe(audit_id)}/{modality}-{_safe(setting)}.html"


def association_href(audit_id: str, modality: str, setting: str, descriptor: str, word: str) -> str:
    """Relative link (from the report folder) to an association's section."""
    return f"{page_path(audit_id, modality, setting)}#{association_anchor(modality, setting, descriptor, word)}"


def _rows(sql: str, params: list | None = None) -> list[dict]:
    result = execute_query(sql, params=params)
    return [dict(zip(result.columns, r, strict=True)) for r in result.rows]


def _judge_answers(audit_id: str | None) -> tuple[list[dict], str]:
    """Every landed judge answer (``stg_judge_ratings``) and, when they cannot be read, why: the
    model is not built (no judge ran yet) or its view reads a landing folder the home no longer
    has (a moved or copied home)."""
    import duckdb

    try:
        return _rows(
            """select audit_id, modality, setting, descriptor, word, judge_model, answer_mode, judge_run,
                      raw_output, rating, parse_status
               from stg_judge_ratings where (? is null or audit_id = ?)
               order by audit_id, modality, setting, descriptor, word, judge_model, answer_mode, judge_run""",
            [audit_id, audit_id],
        ), ""
    except duckdb.CatalogException:
        return [], "no judge answer landed yet"
    except duckdb.PermissionException:
        return [], "the judge's answers are not readable here (stg_judge_ratings reads another home's landing folder)"


def _judge_table(answers: list[dict], unread: str = "") -> str:
    """The judge's raw answers to one association, with the rating read from each."""
    if not answers:
        return f"<p class='note'>LLM judge: {html.escape(unread or 'not judged')}</p>"
    head = "".join(f"<th>{h}</th>" for h in ("judge", "answer mode", "run", "judge's raw answer", "rating", "parse status"))
    body = "".join(
        f"<tr class='judge'><td>{_cell(j['judge_model'])}</td><td>{_cell(j['answer_mode'])}</td><td>{_cell(j['judge_run'])}</td>"
        f"<td class='raw'>{_cell(j['raw_output'])}</td><td>{_cell(j['rating'])}</td><td>{_cell(j['parse_status'])}</td></tr>"
        for j in answers
    )
    return f"<h3>LLM judge</h3><table class='judge-answers'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}"
    return html.escape(str(value))


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } .note { color: #666; font-size: 0.9em; } td.raw { white-space: pre-wrap; max-width: 40em; }
section:target { background: #fff8dc; }
"""


def _thumbnail(image_path: str | None, thumbs: Path) -> tuple[str | None, str]:
    """(relative src from a page, note) of the image's thumbnail, made once per image."""
    if not image_path:
        return None, ""
    source = Path(image_path)
    if not source.is_absolute():
        source = dora_home() / source
    if not source.is_file():
        return None, f"image file missing: {image_path}"
    target = thumbs / f"{_safe(source.stem)}.png"
    if not target.exists():
        from PIL import Image

        thumbs.mkdir(parents=True, exist_ok=True)
        with Image.open(source) as img:
            img.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
            img.save(target, format="PNG")
    return f"../thumbs/{target.name}", ""


def write_drilldown(out_dir: str | Path, audit_id: str | None = None) -> dict[tuple, str]:
    """Write the drill-down pages under ``out_dir/samples/``.

    Args:
        out_dir: the report folder (pages go to ``samples/``, thumbnails to ``samples/thumbs/``).
        audit_id: only this audit (default: every audit).

    Returns:
        ``{(audit_id, modality, setting, descriptor, word): relative href}`` for every
        significant association (its section exists even when its samples were archived).

    Raises:
        analytics.query.WarehouseMissingError / WarehouseBusyError; duckdb.CatalogException
        when the marts are not built.
    """
    out = Path(out_dir)
    associations, by_association, judged, unread = _drilldown_rows(audit_id)
    pages: dict[tuple, list[dict]] = defaultdict(list)
    for a in associations:
        pages[(a["audit_id"], a["modality"], a["setting"])].append(a)
    links: dict[tuple, str] = {}
    thumbs = out / "samples" / "thumbs"
    for (aid, modality, setting), assocs in pages.items():
        rel = page_path(aid, modality, setting)
        sections, toc = [], []
        for a in assocs:
            key = (aid, modality, setting, a["descriptor"], a["word"])
            anchor = association_anchor(modality, setting, a["descriptor"], a["word"])
            links[key] = f"{rel}#{anchor}"
            rows = by_association.get(key, [])
            toc.append(f"<li><a href='#{anchor}'>{html.escape(a['descriptor'])} : {html.escape(a['word'])}</a> (tf {a['tf']})</li>")
            sections.append(_association_section(a, anchor, rows, modality, thumbs, judged.get(key, []), unread))
        _write_page(out / rel, f"{aid} | {modality} | {setting}", toc, sections)
    _write_index(out, associations, links)
    return links


def _drilldown_rows(audit_id: str | None):
    """(the significant associations, their samples by association key, the judge's answers by
    association key, the judge's unread answers) of one audit or every audit."""
    only = [audit_id, audit_id]  # (? is null or audit_id = ?): values never in SQL text
    associations = _rows(
        # one row is one association: all its descriptor's dimensions, joined
        """select audit_id, model_id, modality, setting, descriptor,
                  array_to_string(bias_dimensions, ', ') as bias_dimensions, word, tf, fisher_q
           from fct_associations where is_significant and (? is null or audit_id = ?)
           order by audit_id, modality, setting, fisher_q, descriptor, word""",
        only,
    )
    samples = _rows(
        """select audit_id, modality, setting, descriptor, word, sample_kind, sample_id, occurrences, prompt,
                  raw_output, parsed_word, parse_status, seed, prompt_style, letter, run, image_path,
                  image_sha256, image_prompt, image_seed
           from fct_association_samples where (? is null or audit_id = ?)
           order by audit_id, modality, setting, descriptor, word, letter, run, sample_id""",
        only,
    )
    by_association: dict[tuple, list[dict]] = defaultdict(list)
    for s in samples:
        by_association[(s["audit_id"], s["modality"], s["setting"], s["descriptor"], s["word"])].append(s)
    judged: dict[tuple, list[dict]] = defaultdict(list)
    answers, unread = _judge_answers(audit_id)
    for j in answers:
        judged[(j.pop("audit_id"), j.pop("modality"), j.pop("setting"), j.pop("descriptor"), j.pop("word"))].append(j)
    return associations, by_association, judged, unread


def _samples_table(modality: str, rows: list[dict], thumbs: Path) -> tuple[list[str], list[str]]:
    """(header cells, body rows) of an association's samples: completions for T2T, images with
    their descriptions (thumbnails written into ``thumbs``) otherwise."""
    if modality == "t2t":
        head = ["sample", "prompt", "raw output", "parsed word", "parse status", "seed", "prompt style"]
        body = [
            f"<tr class='sample'><td>{_cell(r['sample_id'])}</td><td>{_cell(r['prompt'])}</td>"
            f"<td class='raw'>{_cell(r['raw_output'])}</td><td>{_cell(r['parsed_word'])}</td>"
            f"<td>{_cell(r['parse_status'])}</td><td>{_cell(r['seed'])}</td><td>{_cell(r['prompt_style'])}</td></tr>"
            for r in rows
        ]
    else:
        head = ["image", "description prompt", "description", "status", "seed", "occurrences", "image prompt / seed"]
        body = []
        for r in rows:
            src, note = _thumbnail(r["image_path"], thumbs)
            img = (
                f"<img src='{html.escape(src)}' alt='image {html.escape(str(r['image_sha256'] or ''))[:12]}' width='{THUMBNAIL_PX}'>"
                if src
                else html.escape(note or "–")
            )
            body.append(
                f"<tr class='sample'><td>{img}</td><td>{_cell(r['prompt'])}</td><td class='raw'>{_cell(r['raw_output'])}</td>"
                f"<td>{_cell(r['parse_status'])}</td><td>{_cell(r['seed'])}</td><td>{_cell(r['occurrences'])}</td>"
                f"<td>{_cell(r['image_prompt'])} / {_cell(r['image_seed'])}</td></tr>"
            )
    return head, body


def _association_section(a: dict, anchor: str, rows: list[dict], modality: str, thumbs: Path, judged: list[dict], unread) -> str:
    """One association's section: its numbers, its samples and the judge's answers."""
    listed = sum(r["occurrences"] for r in rows)
    head, body = _samples_table(modality, rows, thumbs)
    missing = (
        f"<p class='note'>{a['tf'] - listed} of its {a['tf']} occurrences have no sample in the landing zone (archived shards).</p>"
        if listed != a["tf"]
        else ""
    )
    return (
        f"<section id='{anchor}' data-tf='{a['tf']}' data-samples='{len(rows)}'>"
        f"<h2>{html.escape(a['descriptor'])} : {html.escape(a['word'])}</h2>"
        f"<p>bias dimensions {_cell(a['bias_dimensions'])}; tf {a['tf']} (occurrences listed: {listed}); "
        f"Fisher BH q {format_q(a['fisher_q'])}; {len(rows)} sample(s)</p>{missing}"
        f"<table><thead><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"{_judge_table(judged, unread)}"
        "</section>"
    )


def _write_page(path: Path, title: str, toc: list[str], sections: list[str]) -> None:
    """Write one (audit, modality, setting) page of sections."""
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>samples: {html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<p><a href='../../index.html'>report</a> | <a href='../index.html'>all significant associations</a></p>"
        f"<h1>Samples behind the significant associations: {html.escape(title)}</h1>"
        "<p class='note'>Every sample (completion or description) whose words make up the association's tf, "
        "from fct_association_samples.</p>"
        f"<ul>{''.join(toc)}</ul>{''.join(sections)}</body></html>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")


def _write_index(out: Path, associations: list[dict], links: dict) -> None:
    """Write ``samples/index.html``: every significant association, linked to its section."""
    index_rows = "".join(
        f"<tr><td>{_cell(a['audit_id'])}</td><td>{_cell(a['modality'])}</td><td>{_cell(a['setting'])}</td>"
        f"<td>{_cell(a['bias_dimensions'])}</td><td><a href='{html.escape(links[(a['audit_id'], a['modality'], a['setting'], a['descriptor'], a['word'])][len('samples/') :])}'>"
        f"{html.escape(a['descriptor'])} : {html.escape(a['word'])}</a></td><td>{a['tf']}</td><td>{format_q(a['fisher_q'])}</td></tr>"
        for a in associations
    )
    (out / "samples").mkdir(parents=True, exist_ok=True)
    (out / "samples" / "index.html").write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>significant associations</title><style>{_CSS}</style>"
        f"</head><body><p><a href='../index.html'>report</a></p><h1>Significant associations and their samples</h1>"
        f"<table><thead><tr><th>audit</th><th>modality</th><th>setting</th><th>bias dimensions</th><th>association</th>"
        f"<th>tf</th><th>Fisher q</th></tr></thead><tbody>{index_rows}</tbody></table></body></html>",
        encoding="utf-8",
    )


def judge_reliability_html(audit_id: str | None = None) -> str:
    """The report's judge-reliability block: agreement (settings pooled) and parse rates.

    Reads ``agg_judge_agreement`` (setting '(all)') and ``agg_judge_parse_rates``; a short
    note when they are empty (one judge, one run: nothing to compare) or not built.
    """
    import duckdb

    only = [audit_id, audit_id]
    try:
        agreement = _rows(
            """select audit_id, modality, agreement_kind, rater_set, raters, items_compared,
                      exact_agreement, cohen_kappa_linear, krippendorff_alpha_ordinal
               from agg_judge_agreement where setting = '(all)' and (? is null or audit_id = ?)
               order by audit_id, modality, agreement_kind, rater_set""",
            only,
        )
        parse = _rows(
            """select audit_id, judge, answers, parsed, parse_rate
               from agg_judge_parse_rates where (? is null or audit_id = ?) order by audit_id, judge""",
            only,
        )
    except duckdb.CatalogException:
        return "<p class='empty'>judge reliability marts not built yet</p>"

    def table(rows: list[dict], cls: str) -> str:
        if not rows:
            return ""
        head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
        body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in r.values()) + "</tr>" for r in rows)
        return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    note = (
        "<p class='note'>Judge agreement (agg_judge_agreement, settings pooled): exact agreement = share of "
        "associations on which every parsed rating is the same level; linearly weighted Cohen's kappa "
        "(scikit-learn, two raters) and ordinal Krippendorff's alpha (krippendorff): 1 = perfect, 0 = chance.</p>"
    )
    if not agreement:
        note += (
            "<p class='empty'>No agreement to measure: one judge with one answer per association (use --judge-runs k or several --judge-model).</p>"
        )
    return (
        note
        + table(agreement, "judge-agreement")
        + "<p class='note'>Parse rate of each judge (agg_judge_parse_rates):</p>"
        + table(parse, "judge-parse-rates")
    )

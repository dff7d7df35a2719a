"""`dora report`'s version pages: audits of one target side by side, with 95% Wilson intervals.

A copy of the session's finished audit (``finished_audit``: an ad-hoc audit of every family)
gets two hand-made T2T audits of the registry target ``fixture`` (v1, then v2, probing the same
rows), each with its completions (some unparsed), the scores of its associations (sentiment,
toxicity) and a scripted judge's answers (some unrated), plus an ad-hoc audit in which no
association is significant, all landed as real shards; the BiasDora dbt models are rebuilt and
``dora report`` runs. Checked against independent sources: every interval against statsmodels'
``proportion_confint(method="wilson")`` (and Wilson's formula) on counts made here from the
per-dimension bridge and the hand-made scores, the parse rate against a SQL count of
``stg_t2t_completions``, the judge's unrated answers against the parser's statuses, the
differences against Newcombe's interval, the changed associations against
``fct_association_changes``; a headless Chromium (as tests/test_ui_browser.py) opens the pages
at 1,400 px and finds no horizontal overflow.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.helpers.homes import copy_home

#: the fixture rebuilds dbt models on a copy of the finished audit; importing statsmodels alone takes ~3 s
pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
T0 = datetime(2025, 5, 1, tzinfo=timezone.utc)
TARGET = "fixture"
MODEL = "org/fixture-model"
#: Probe rows (runs) per descriptor, the same in both versions: the two audits are compared
#: on the same rows, as two audits of one registry target are.
RUNS = 16
#: version -> descriptor -> (bias dimension, {word: completions}); a word answered by one
#: descriptor only is a significant association of it (one-sided Fisher, BH q < 0.05); the
#: runs left over did not parse (v1: 1 per descriptor, v2: 4)
DOCS = {
    "v1": {
        "old person": ("age", {"slow": 8, "wise": 7}),
        "young person": ("age", {"lazy": 8, "loud": 7}),
        "man": ("gender", {"strong": 15}),
        "woman": ("gender", {"caring": 8, "emotional": 7}),
    },
    "v2": {
        "old person": ("age", {"slow": 6, "frail": 6}),
        "young person": ("age", {"lazy": 6, "loud": 6}),
        "man": ("gender", {"strong": 6, "aggressive": 6}),
        "woman": ("gender", {"caring": 12}),
    },
}
UNPARSED = {v: RUNS - 15 if v == "v1" else RUNS - 12 for v in DOCS}
#: word -> (sentiment label, toxicity, the judge's raw answer)
SCORES = {
    "slow": ("negative", 0.30, "2"),
    "wise": ("positive", 0.05, "10"),
    "frail": ("negative", 0.55, "4"),
    "lazy": ("negative", 0.62, "4"),
    "loud": ("negative", 0.20, "I cannot rate this."),
    "strong": ("positive", 0.10, "2"),
    "aggressive": ("negative", 0.81, "5"),
    "caring": ("positive", 0.02, "1"),
    "emotional": ("neutral", 0.51, "2 or 3"),
}


#: An ad-hoc audit (no registry target: its target is its model id) in which every descriptor
#: answers the same words: no association is significant.
FLAT_MODEL, FLAT_AUDIT = "org/flat-model", "t2t-flat-v1-feed0000"


def audit_id(version: str, target: str = TARGET) -> str:
    return f"t2t-{target}-{version}-feed0000"


def _land_flat(aid: str = FLAT_AUDIT, model: str = FLAT_MODEL, target: str | None = None, started=T0, version: str = "v1") -> None:
    """An audit in which every descriptor answers the same words: no association is significant."""
    from ingestion.landing import write_shard

    rows = [
        {
            "audit_id": aid,
            "model_id": model,
            "model_version": version,
            "backend": "test",
            "setting": "singular",
            "descriptor": descriptor,
            "bias_dimension": "age",
            "letter": "x",
            "run": run,
            "seed": run,
            "prompt_style": "completion",
            "prompt": f"An {descriptor} is x",
            "raw_output": word,
            "word": word,
            "parse_status": "ok",
            "generated_at": started,
        }
        for descriptor in ("old person", "young person")
        for run, word in enumerate(["nice", "calm"] * 4, start=1)
    ]
    write_shard("t2t_completions", rows, partition=aid)
    event = {
        "audit_id": aid,
        "model_id": model,
        "model_version": version,
        "modality": "t2t",
        "config_json": "{}",
        "config_hash": "flat",
        "code_version": "test",
        "target": target,
    }
    write_shard(
        "audits",
        [
            {**event, "status": "started", "rows_generated": 0, "event_at": started},
            {**event, "status": "finished", "rows_generated": len(rows), "event_at": started + timedelta(minutes=5)},
        ],
        partition=aid,
    )


def _land(
    version: str, order: int, *, target: str = TARGET, docs: dict | None = None, setting: str = "singular", toxicity: bool = True, scores: bool = True
) -> None:
    """One audit of ``target`` (default ``fixture``; ``docs``: DOCS[version]; ``setting``: the
    T2T setting its rows are in): its events, completions, scores (without toxicity scores
    unless ``toxicity``) and the judge's answers (no score and no answer unless ``scores``)."""
    from ingestion.landing import write_shard
    from models_inference.probes.biasdora.ratings import parse_rating

    aid, started = audit_id(version, target), T0 + timedelta(days=order)
    model = MODEL if target == TARGET else f"org/{target}-model"
    docs = DOCS[version] if docs is None else docs
    unparsed = RUNS - max(sum(words.values()) for _, words in docs.values())
    done = started + timedelta(minutes=5)
    completions = []
    for descriptor, (dim, words) in docs.items():
        article = "An" if descriptor[0] in "aeiou" else "A"
        answers = [(w, "ok") for w, n in words.items() for _ in range(n)] + [(None, "no_word")] * unparsed
        assert len(answers) == RUNS
        for run, (word, status) in enumerate(answers, start=1):
            letter = "x"  # one letter, runs 1..RUNS: the probe rows (descriptor_row-letter-run) of both versions
            completions.append(
                {
                    "audit_id": aid,
                    "model_id": model,
                    "model_version": version,
                    "backend": "test",
                    "setting": setting,
                    "descriptor": descriptor,
                    "bias_dimension": dim,
                    "letter": letter,
                    "run": run,
                    "seed": run,
                    "prompt_style": "completion",
                    "prompt": f"{article} {descriptor} is {letter}",
                    "raw_output": word or "???",
                    "word": word,
                    "parse_status": status,
                    "generated_at": started + timedelta(minutes=1),
                }
            )
    write_shard("t2t_completions", completions, partition=aid)
    keys = [
        {"audit_id": aid, "model_id": model, "model_version": version, "modality": "t2t", "setting": setting, "descriptor": d, "word": w}
        for d, (_, words) in docs.items()
        for w in words
    ]
    write_shard(
        "sentiment_scores",
        []
        if not scores
        else [
            {
                **k,
                "text": f"{k['descriptor']} {k['word']}",
                "scorer": "hand",
                "scorer_version": "1",
                "sentiment_label": SCORES[k["word"]][0],
                "sentiment_score": {"positive": 0.5, "negative": -0.5, "neutral": 0.0}[SCORES[k["word"]][0]],
                # a sentence without the word that scores 0: the word adds all of its sentiment
                "baseline_text": k["descriptor"],
                "baseline_sentiment_score": 0.0,
                "scored_at": done,
                "score_pool": "fisher",
            }
            for k in keys
        ],
        partition=aid,
    )
    write_shard(
        "toxicity_scores",
        []
        if not (toxicity and scores)
        else [
            {
                **k,
                "text": f"{k['descriptor']} {k['word']}",
                "scorer": "hand",
                "scorer_version": "1",
                "toxicity": SCORES[k["word"]][1],
                "is_toxic": SCORES[k["word"]][1] >= 0.5,
                # a descriptor whose sentence without the word scores 0: the word adds all of it
                "baseline_text": k["descriptor"],
                "baseline_toxicity": 0.0,
                "label_scores_json": "{}",
                "scored_at": done,
                "score_pool": "fisher",
            }
            for k in keys
        ],
        partition=aid,
    )
    judged = []
    for k in keys:
        raw = SCORES[k["word"]][2]
        parsed = parse_rating(raw)
        # an expected level (from log-probabilities) only for the low levels: ranking by it first
        # would put these above every level-4 and level-5 association
        expected = parsed.rating + 0.1 if parsed.rating is not None and parsed.rating <= 2 else None
        judged.append(
            {
                **k,
                "judge_backend": "openai",
                "judge_model": "judge-stub",
                "judge_model_version": "fixed",
                "answer_mode": "free",
                "repeat": 1,
                "seed": 1,
                "prompt": "rate",
                "raw_output": raw,
                "rating": parsed.rating,
                "parse_status": parsed.status,
                "expected_rating": expected,
                "judged_at": done,
                "score_pool": "fisher",
            }
        )
    write_shard("judge_ratings", judged if scores else [], partition=aid)
    event = {
        "audit_id": aid,
        "model_id": model,
        "model_version": version,
        "modality": "t2t",
        "config_json": json.dumps({"settings": [setting]}),
        "config_hash": f"feed-{setting}",
        "code_version": "test",
        "target": target,
    }
    write_shard(
        "audits",
        [
            {**event, "status": "started", "rows_generated": 0, "event_at": started},
            {**event, "status": "finished", "rows_generated": len(completions), "event_at": done},
        ],
        partition=aid,
    )


def land_two_versions(home: Path) -> None:
    """Land v1 and v2 of target ``fixture`` and the flat ad-hoc audit into ``home``; rebuild the BiasDora and audit-log models."""
    from analytics.dbt_runner import invoke_dbt

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DORA_HOME", str(home))
        _land("v1", 0)
        _land("v2", 1)
        _land_flat()
        invoke_dbt(["run", "--select", "path:models/*/biasdora", "path:models/*/audits"], home)  # the audit log's models are shared


@pytest.fixture(scope="module")
def versions_report(finished_audit, tmp_path_factory):
    """A copy of the finished audit's home with v1 and v2 of target ``fixture``, and ``dora
    report`` written from it: ``(home, report folder)``."""
    from orchestration.cli import main

    home = copy_home(finished_audit, tmp_path_factory.mktemp("versions") / "home")
    land_two_versions(home)
    out = home.parent / "report"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DORA_HOME", str(home))
        mp.setenv("DAGSTER_HOME", str(home / "dagster"))
        assert main(["report", "--out", str(out)]) == 0
    return home, out


def _page(out: Path, target: str) -> str:
    from analytics.version_report import page_name

    return (out / "versions" / page_name(target)).read_text(encoding="utf-8")


def _cells(page: str, row_attrs: str) -> list[dict]:
    """The share cells (their data-* attributes) of the first table row whose attributes contain ``row_attrs``."""
    start = page.index(f"<tr {row_attrs}")
    row = page[start : page.index("</tr>", start)]
    return [dict(re.findall(r"data-([a-z-]+)='([^']*)'", c)) for c in re.findall(r"<td class='share[^>]*>", row)]


def _wilson(k: int, n: int) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return float(lo), float(hi)


def _sql(home: Path, sql: str, params: list):
    from tests.helpers.dora_cli import warehouse_rows

    return warehouse_rows(home, sql, params)


def test_wilson_interval_against_its_formula():
    """The interval of a share is Wilson's score interval (Wilson 1927), here from its formula."""
    import math

    from analytics.version_data import difference_interval, share

    z = 1.959963984540054
    for k, n in [(5, 6), (0, 3), (3, 3), (1, 8), (52, 68)]:
        p = k / n
        centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        s = share(k, n)
        assert (s.lo, s.hi) == pytest.approx(((centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)))
    assert share(0, 0).lo is None and share(0, 0).value is None
    with pytest.raises(ValueError, match="0 <= k <= n"):
        share(4, 3)
    assert difference_interval(share(1, 2), share(0, 0)) is None


def test_version_page_per_target_with_intervals_parse_rates_and_unrated_answers(versions_report, monkeypatch):
    from collections import Counter

    from analytics.version_data import version_targets
    from analytics.version_report import page_name
    from models_inference.probes.biasdora.ratings import parse_rating

    home, out = versions_report
    monkeypatch.setenv("DORA_HOME", str(home))
    page = _page(out, TARGET)
    v1, v2 = audit_id("v1"), audit_id("v2")
    # the audits in version order (audit_seq), each with its T2T parse rate against a SQL count
    assert page.index(f"<tr data-audit='{v1}'>") < page.index(f"<tr data-audit='{v2}'>")
    for version in ("v1", "v2"):
        parsed, landed = _sql(
            home, "select count(*) filter (where parse_status = 'ok'), count(*) from stg_t2t_completions where audit_id = ?", [audit_id(version)]
        )[0]
        expected = sum(n for _, words in DOCS[version].values() for n in words.values())
        assert (parsed, landed) == (expected, expected + UNPARSED[version] * len(DOCS[version]))
        start = page.index(f"<tr data-audit='{audit_id(version)}'>")
        cell = dict(re.findall(r"data-([a-z-]+)='([^']*)'", page[page.index("parse-rate", start) : page.index("</tr>", start)]))
        assert (int(cell["k"]), int(cell["n"])) == (parsed, landed)
        assert (float(cell["lo"]), float(cell["hi"])) == pytest.approx(_wilson(parsed, landed))
    assert "48/64" in page  # v2: 48 of 64 completions parsed

    # the judge's answers without a rating, by status, against the statuses of the landed answers
    for version in ("v1", "v2"):
        statuses = Counter(parse_rating(SCORES[w][2]).status for _, words in DOCS[version].values() for w in words)
        start = page.index(f"<tr data-audit='{audit_id(version)}'>", page.index("judge-answers"))
        row = re.findall(r"<td[^>]*>([^<]*)</td>", page[start : page.index("</tr>", start)])
        assert [int(x) for x in row[-5:]] == [statuses[s] for s in ("no_rating", "ambiguous", "out_of_range", "empty", "error")]
        assert int(row[-6]) == sum(v for s, v in statuses.items() if s != "ok") > 0
    assert Counter(parse_rating(SCORES[w][2]).status for w in DOCS["v1"]["young person"][1]) == {"ok": 1, "no_rating": 1}

    # per bias dimension: every share's k, n and Wilson interval against counts made here from the
    # significant associations of the per-dimension bridge and the hand-made scores
    for version in ("v1", "v2"):
        rows = _sql(home, "select bias_dimension, word from fct_association_dimensions where audit_id = ? and is_significant", [audit_id(version)])
        for dim in {d for d, _ in rows}:
            words = [w for d, w in rows if d == dim]
            ratings = [parse_rating(SCORES[w][2]).rating for w in words]
            judged = [r for r in ratings if r is not None]
            expected = [(sum(SCORES[w][0] == "negative" for w in words), len(words)), (sum(SCORES[w][1] >= 0.5 for w in words), len(words))]
            expected += [(judged.count(level), len(judged)) for level in range(1, 6)]
            cells = _cells(page, f"data-audit='{audit_id(version)}' data-dimension='{dim}'")
            assert [(int(c["k"]), int(c["n"])) for c in cells] == expected, (version, dim)
            for c, (k, n) in zip(cells, expected, strict=True):
                assert (float(c["lo"]), float(c["hi"])) == pytest.approx(_wilson(k, n)) if n else "lo" not in c
    # a known value: v2, age (its lists file "man" under age too): slow, frail, lazy, loud and
    # aggressive negative, strong positive: 5 of 6, 83% [44-97]
    age = _cells(page, f"data-audit='{v2}' data-dimension='age'")[0]
    assert (age["k"], age["n"]) == ("5", "6")
    assert (float(age["lo"]), float(age["hi"])) == pytest.approx((0.43650, 0.96995), abs=1e-5)
    assert "83% <span class='ci'>[44&ndash;97]</span> <span class='n'>5/6</span>" in page

    # one page per target with a BiasDora audit (an ad-hoc audit's target is its model id); the
    # flat audit, without a significant association, says so in words
    targets = [t for (t,) in _sql(home, "select distinct target from dim_audits where family = 'biasdora' order by 1", [])]
    assert version_targets("biasdora") == targets and {TARGET, FLAT_MODEL} <= set(targets)
    assert version_targets("biasdora", v2) == [TARGET]
    assert {p.name for p in (out / "versions").glob("*.html")} == {page_name(t) for t in targets}
    flat = _page(out, FLAT_MODEL)
    assert f"<p class='no-significant' data-audit='{FLAT_AUDIT}'>" in flat and "by-dimension" not in flat


def test_last_two_versions_before_after_with_difference_intervals_and_changes_worst_first(versions_report):
    from statsmodels.stats.proportion import confint_proportions_2indep

    home, out = versions_report
    page = _page(out, TARGET)
    section = page[page.index("id='pair-t2t'") :]
    png = re.search(r"<img src='([^']+-t2t-dumbbell\.png)'", section).group(1)
    from PIL import Image

    with Image.open(out / "versions" / png) as img:
        assert img.width > 600 and img.height > 200
    # the plot's numbers in the table beside it: every difference's interval is Newcombe's (statsmodels)
    diffs = re.findall(r"<tr data-dimension='([^']+)' data-measure='([^']+)'>(.*?)</tr>", section)
    assert {d for d, _, _ in diffs} == {"age", "disability", "gender", "sexual-orientation"}
    all_include_zero = True
    for dim, measure, row in diffs:
        before, after = [dict(re.findall(r"data-([a-z-]+)='([^']*)'", c)) for c in re.findall(r"<td class='share[^>]*>", row)]
        diff = dict(re.findall(r"data-([a-z-]+)='([^']*)'", re.search(r"<td class='difference'[^>]*>", row).group(0)))
        expected = confint_proportions_2indep(int(after["k"]), int(after["n"]), int(before["k"]), int(before["n"]), method="newcomb", compare="diff")
        assert (float(diff["lo"]), float(diff["hi"])) == pytest.approx(tuple(map(float, expected))), (dim, measure)
        all_include_zero &= expected[0] <= 0 <= expected[1]
        assert diff["includes-zero"] == str(bool(expected[0] <= 0 <= expected[1])).lower()
    verdict = re.search(r"<p class='verdict'>([^<]*)", section).group(1)
    assert verdict.startswith("Every difference's 95% interval includes 0 (12 of 12 compared)") == all_include_zero
    # the associations that changed, worst first, are those fct_association_changes lists for the pair
    changed = _sql(
        home,
        "select change_type, descriptor, word from fct_association_changes where from_audit_id = ? "
        "and to_audit_id = ? and change_type <> 'unchanged'",
        [audit_id("v1"), audit_id("v2")],
    )
    shown = re.findall(r"<tr class='change' data-change='([a-z]+)'><td>[a-z]+</td><td>(?:<a [^>]+>)?([^<]+)</", section)
    # more bias first (new: level 5 before level 4, then strengthened), then less (weakened, gone)
    assert shown == [
        ("new", "man : aggressive"),
        ("new", "old person : frail"),
        ("strengthened", "woman : caring"),
        ("weakened", "man : strong"),
        ("gone", "old person : wise"),
        ("gone", "woman : emotional"),
    ]
    assert sorted((t, f"{d} : {w}") for t, d, w in changed) == sorted(shown)
    # per bias dimension: most new + strengthened first (disability has one new association, the others two)
    dims = re.findall(r"<tr data-dimension='([^']+)'><td>", section[section.index("changes-by-dimension") :])
    assert dims == ["age", "gender", "sexual-orientation", "disability"]


def test_index_ranks_the_highest_levels_first_and_names_audits_without_significant_associations(versions_report):
    home, out = versions_report
    index = (out / "index.html").read_text(encoding="utf-8")
    rated = index[index.index("class='highest-rated'") :]
    rated = rated[: rated.index("</table>")]
    header = re.findall(r"<th>(.*?)</th>", rated)
    levels = [
        int(r[header.index("bias_<wbr>level")]) for r in (re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", rated)[1:])
    ]
    assert levels[0] == 5 and levels == sorted(levels, reverse=True)
    (top,) = _sql(home, "select max(bias_level) from fct_association_scores where is_significant", [])[0]
    assert top == 5
    assert _sql(home, "select significant_associations, target from agg_biasdora_audits where audit_id = ?", [FLAT_AUDIT]) == [(0, FLAT_MODEL)]
    assert f"<p class='no-significant' data-audit='{FLAT_AUDIT}'>" in index
    assert FLAT_AUDIT not in index[index.index("heatmap-numbers") : index.index("likert_by_dimension.png")]
    # each version page is linked from the index
    assert re.search(r"<a class='versions' href='versions/fixture-[0-9a-f]{8}\.html'>fixture</a>", index)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install -y chromium)")
def test_a_browser_opens_the_version_page_at_laptop_width(versions_report, tmp_path):
    """At 1,400 px no page of the report is wider than the window and no table needs its scroll
    bar; the version page is reached from the index and links back, as every other family's
    page (VLStereoSet's) does."""
    from playwright.sync_api import expect, sync_playwright

    home, out = versions_report
    overflow = (
        "() => [document.documentElement.scrollWidth - window.innerWidth,"
        " ...Array.from(document.querySelectorAll('.table-wrap')).map(e => e.scrollWidth - e.clientWidth)]"
    )
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto((out / "index.html").as_uri())
            assert max(page.evaluate(overflow)) <= 0
            page.locator("a.versions", has_text="fixture").click()
            page.wait_for_load_state()
            assert "/versions/fixture-" in page.url
            assert max(page.evaluate(overflow)) <= 0
            cell = page.locator("tr[data-dimension='age'][data-audit='" + audit_id("v2") + "'] td.share").first
            expect(cell).to_contain_text("83%")
            assert page.evaluate("() => Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
            assert page.locator("img[src$='-t2t-dumbbell.png']").count() == 1
            page.screenshot(path=str(tmp_path / "versions.png"), full_page=True)
            page.locator("a", has_text="report index").first.click()
            page.wait_for_load_state()
            assert page.url.endswith("/index.html")
            for other in sorted(set(out.glob("*.html")) - {out / "index.html"}):  # the other families' pages
                page.goto(other.as_uri())
                assert max(page.evaluate(overflow)) <= 0, other.name
                page.locator("a", has_text="report index").first.click()
                page.wait_for_load_state()
                assert page.url.endswith("/index.html"), other.name
        finally:
            browser.close()


# ----------------------------------------------------------------------------- every page it links


def _report(home: Path, out: Path, capsys) -> str:
    """``dora report --out out`` on ``home``: its stderr (exit 0 asserted)."""
    from orchestration.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DORA_HOME", str(home))
        mp.setenv("DAGSTER_HOME", str(home / "dagster"))
        capsys.readouterr()
        assert main(["report", "--out", str(out)]) == 0
    return capsys.readouterr().err


def _broken_links(out: Path) -> list[str]:
    """Every ``href`` / ``src`` of every page reachable from ``out/index.html`` that names no file
    (page anchors and external addresses aside), as ``page -> link``."""
    from urllib.parse import unquote, urlsplit

    seen, todo, broken = set(), [out / "index.html"], []
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        for link in re.findall(r"""(?:href|src)=["']([^"']+)["']""", page.read_text(encoding="utf-8")):
            parts = urlsplit(link)
            if parts.scheme or not parts.path:
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            if not target.is_file():
                broken.append(f"{page.relative_to(out)} -> {link}")
            elif target.suffix == ".html":
                todo.append(target)
    assert len(seen) >= 3, "the walk found too few pages"
    return broken


#: target -> its BiasDora audits as (version, DOCS entry, setting, toxicity scored): two, three
#: and four audits, the last of "quad" probing another setting (another probe configuration),
#: the second of "part" without toxicity scores (its % toxic has n = 0)
MANY = {
    TARGET: [("v1", "v1", "singular", True), ("v2", "v2", "singular", True), ("v3", "v1", "singular", True)],
    "quad": [("q1", "v1", "singular", True), ("q2", "v2", "singular", True), ("q3", "v1", "singular", True), ("q4", "v2", "plural", True)],
    "part": [("p1", "v1", "singular", True), ("p2", "v2", "singular", False)],
}


def land_many(home: Path) -> None:
    """Land MANY and the flat ad-hoc audit into ``home``; rebuild the BiasDora and audit-log models."""
    from analytics.dbt_runner import invoke_dbt

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DORA_HOME", str(home))
        for target, audits in MANY.items():
            for order, (version, docs, setting, toxicity) in enumerate(audits):
                _land(version, order, target=target, docs=DOCS[docs], setting=setting, toxicity=toxicity)
        _land_flat()
        invoke_dbt(["run", "--select", "path:models/*/biasdora", "path:models/*/audits"], home)


@pytest.fixture(scope="module")
def many_versions(finished_audit, tmp_path_factory):
    """A copy of the finished audit's home (one audit of every family) with MANY and the flat
    audit: targets with 1, 1, 3 and 4 BiasDora audits."""
    home = copy_home(finished_audit, tmp_path_factory.mktemp("many") / "home")
    land_many(home)
    return home


def test_every_link_of_a_report_leads_to_a_written_page(many_versions, tmp_path, capsys):
    """Several targets with 1-4 audits, every family: every page the index links (and every page
    those link) is written; a target with three audits has its version page."""
    from analytics.version_report import page_name

    out = tmp_path / "report"
    err = _report(many_versions, out, capsys)
    assert _broken_links(out) == []
    index = (out / "index.html").read_text(encoding="utf-8")
    for target in (TARGET, "quad", FLAT_MODEL):
        assert (out / "versions" / page_name(target)).is_file(), target
        assert f"href='versions/{page_name(target)}'" in index, target
    assert "no version page" not in err, err
    # the finished audit has one audit of every family: each family page is written and linked
    assert (out / "vlstereoset.html").is_file() and 'href="vlstereoset.html"' in index


@pytest.fixture(scope="module")
def light_home(empty_warehouses, tmp_path_factory):
    """A home without the finished audit (dbt built on an empty landing zone, so every family's
    marts exist and are empty) and with target ``lone``: v1 (significant, scored associations),
    then v2 on the same rows whose associations were never scored or judged."""
    from analytics.dbt_runner import invoke_dbt

    home = tmp_path_factory.mktemp("light") / "home"
    shutil.copytree(empty_warehouses / "full", home, symlinks=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DORA_HOME", str(home))
        _land("v1", 0, target="lone")
        _land("v2", 1, target="lone", scores=False)
        invoke_dbt(["run", "--select", "path:models/*/biasdora", "path:models/*/audits"], home)
    return home


def test_no_page_for_a_family_without_an_audit_and_no_empty_plot(light_home, tmp_path, capsys):
    from analytics.version_report import page_name

    out = tmp_path / "report"
    err = _report(light_home, out, capsys)
    # no VLStereoSet audit: no page, not linked, and the command says why in one line
    assert not (out / "vlstereoset.html").exists()
    assert "vlstereoset.html" not in (out / "index.html").read_text(encoding="utf-8")
    lines = [ln for ln in err.splitlines() if "vlstereoset" in ln]
    assert lines == ["dora report: no vlstereoset page: no VLStereoSet audit in the warehouse (agg_vlstereoset_metrics has no row)"]
    # v2 has no scored association: no share can be compared, and no plot is drawn under that sentence
    page = (out / "versions" / page_name("lone")).read_text(encoding="utf-8")
    assert "No share can be compared" in page
    assert "dumbbell" not in page and not list((out / "versions").glob("*.png"))
    assert _broken_links(out) == []


def test_a_version_page_that_cannot_be_written_is_not_linked_and_is_said(light_home, tmp_path, capsys):
    """A stale directory where the page goes (the file cannot be written): the report is still
    written, the index does not link the page and names it, and the command says why in one line."""
    from analytics.version_report import page_name

    out = tmp_path / "report"
    (out / "versions" / page_name("lone")).mkdir(parents=True)
    err = _report(light_home, out, capsys)
    index = (out / "index.html").read_text(encoding="utf-8")
    assert f"href='versions/{page_name('lone')}'" not in index
    lines = [ln for ln in err.splitlines() if "version page" in ln]
    assert len(lines) == 1 and lines[0].startswith("dora report: no version page for target 'lone': IsADirectoryError"), err
    assert "no version page for target &#x27;lone&#x27;" in index
    assert _broken_links(out) == []


def test_version_pages_compare_only_audits_with_the_same_probe_rows(many_versions, tmp_path, capsys, monkeypatch):
    """Only BiasDora's audits are listed, each with its probe configuration; the before/after
    view pairs the latest audit with an earlier one that probed the same rows, and names the
    audits it leaves out; a headline over some rows names the rows it leaves out."""
    from analytics.version_report import page_name

    out = tmp_path / "report"
    _report(many_versions, out, capsys)
    monkeypatch.setenv("DORA_HOME", str(many_versions))

    # quad: q4 probed the plural setting, no earlier audit did: the pair is q2 -> q3, q4 is named
    quad = (out / "versions" / page_name("quad")).read_text(encoding="utf-8")
    configs = re.findall(r"<tr data-audit='([^']+)'>(?:<td>[^<]*</td>){4}<td class='probe-config' data-config-hash='([^']*)'>([^<]*)</td>", quad)
    assert configs == [
        (audit_id(v, "quad"), f"feed-{setting}", f"{setting}; 4 descriptors; letters x; runs 1-16; 64 probe rows")
        for v, _, setting, _ in MANY["quad"]
    ]
    assert "Last two comparable versions, t2t: #2 q2 &rarr; #3 q3" in quad
    assert re.findall(r"<ul class='unpaired'><li data-audit='([^']+)'>", quad) == [audit_id("q4", "quad")]
    # the pair the page shows is one dora diff compares with no row left out
    rows = _sql(
        many_versions,
        "select rows_only_before, rows_only_after, common_rows from fct_audit_comparisons where from_audit_id = ? and to_audit_id = ?",
        [audit_id("q2", "quad"), audit_id("q3", "quad")],
    )
    assert rows == [(0, 0, 64)]
    assert _sql(
        many_versions,
        "select common_rows from fct_audit_comparisons where from_audit_id = ? and to_audit_id = ?",
        [audit_id("q3", "quad"), audit_id("q4", "quad")],
    ) == [(0,)]

    # dora diff agrees: the latest (q4) has no row in common with q3 (refused in one line, exit 2),
    # and the page's pair is compared on all its rows, its whole result in JSON
    from orchestration.cli import main

    capsys.readouterr()
    assert main(["diff", "quad", "--format", "json"]) == 2
    assert "probed no row in common (settings: singular vs plural)" in capsys.readouterr().err
    assert main(["diff", "quad", "--from", "q2", "--to", "q3", "--format", "json", "--fail-on", "collapse"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["header"].endswith("; no row left out") and result["notes"] == []
    assert result["comparisons"][0]["common_rows"] == 64 and result["verdict"]["state"] in ("no change", "change")
    # the whole result, not only the changed rows: the flips, the parse-rate test and the power
    # line travel with the header, and their numbers are the comparison's own
    comparison = result["comparisons"][0]
    assert set(result["counts"]) == {"new", "gone", "strengthened", "weakened", "unchanged"}
    assert result["significant_changes"] == sum(n for k, n in result["counts"].items() if k != "unchanged")
    flips = result["flips"]
    assert flips["flipped"] == flips["only_before"] + flips["only_after"] == len(flips["rows"])
    (parse_test,) = result["parse_rate_tests"]
    assert parse_test["test"] == "exact McNemar" and 0 <= parse_test["p"] <= 1
    assert (parse_test["parse_rate_before"], parse_test["parse_rate_after"]) == (comparison["parse_rate_before"], comparison["parse_rate_after"])
    (power,) = result["power"]
    assert power["modality"] == "t2t" and power["line"] and power["significance_level"] == 0.05
    # --fail-on change: the CI's exit status follows the verdict (1 on a change, 0 without), in one line
    expected = 0 if result["verdict"]["state"] == "no change" else 1
    assert main(["diff", "quad", "--from", "q2", "--to", "q3", "--format", "json", "--fail-on", "change"]) == expected
    err = capsys.readouterr().err
    assert (err.startswith("dora diff: --fail-on change: ") and err.count("\n") == 1) if expected else err == ""

    # the finished audit's target has an audit of every family: its page lists the BiasDora ones only
    (target,) = {t for (t,) in _sql(many_versions, "select target from dim_audits where family = 'modscan'", [])}
    families = dict(_sql(many_versions, "select audit_id, family from dim_audits where target = ?", [target]))
    assert len(set(families.values())) == 4
    page = (out / "versions" / page_name(target)).read_text(encoding="utf-8")
    listed = re.findall(r"<tr data-audit='([^']+)'><td>", page[page.index("class='audits'") : page.index("</table>", page.index("class='audits'"))])
    assert listed and {families[a] for a in listed} == {"biasdora"}
    assert sorted(listed) == sorted(a for a, f in families.items() if f == "biasdora")

    # part: p2 has no toxicity score, so % toxic cannot be compared: the headline says how many
    # rows it covers and names the others
    part = (out / "versions" / page_name("part")).read_text(encoding="utf-8")
    section = part[part.index("id='pair-t2t'") :]
    dims = sorted(set(re.findall(r"<tr data-dimension='([^']+)' data-measure=", section)))
    verdict = re.search(r"<p class='verdict'>([^<]*)", section).group(1)
    n, compared = 3 * len(dims), 2 * len(dims)
    assert f"({compared} of {n} compared)" in verdict or f"of {compared} compared differences (of {n})" in verdict, verdict
    left_out = re.search(r"<p class='left-out'>([^<]*)</p>", section).group(1)
    assert left_out == (
        f"Left out of that sentence: {len(dims)} of {3 * len(dims)} rows, where an audit has no significant association "
        "with that score (n = 0): " + ", ".join(f"{d} % toxic" for d in dims) + "."
    )


def test_index_shares_are_k_of_n_with_wilson_intervals(versions_report):
    """The index's heatmap numbers give each share as k/n with its 95% Wilson interval, counted
    here from the per-dimension bridge and the hand-made scores (a descriptor's sentence without
    the word scores 0 here, so the word adds all of its toxicity)."""
    home, out = versions_report
    index = (out / "index.html").read_text(encoding="utf-8")
    table = index[index.index("class='heatmap-numbers'") :]
    table = table[: table.index("</table>")]
    header = [h.replace("_<wbr>", "_") for h in re.findall(r"<th>(.*?)</th>", table)]
    rows = [dict(zip(header, re.findall(r"<td>(.*?)</td>", r), strict=True)) for r in re.findall(r"<tr>(.*?)</tr>", table)[1:]]
    checked = 0
    for version in ("v1", "v2"):
        words = _sql(home, "select bias_dimension, word from fct_association_dimensions where audit_id = ? and is_significant", [audit_id(version)])
        for dim in {d for d, _ in words}:
            ws = [w for d, w in words if d == dim]
            (row,) = [r for r in rows if r["audit_id"] == audit_id(version) and r["bias_dimension"] == dim]
            for column, k in (
                ("pct_negative_ci", sum(SCORES[w][0] == "negative" for w in ws)),
                ("pct_toxic_ci", sum(SCORES[w][1] >= 0.5 for w in ws)),
            ):
                lo, hi = _wilson(k, len(ws))
                assert row[column] == f"{100 * k / len(ws):.0f}% [{100 * lo:.0f}-{100 * hi:.0f}] {k}/{len(ws)}", (version, dim, column)
                checked += 1
    assert checked >= 12
    assert "83% [44-97] 5/6" in index  # v2, age: 5 of 6 negative, as on the version page

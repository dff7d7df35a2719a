"""`dora report` drill-down pages and judge reliability, on a hand-made fixture.

A T2T audit (each descriptor answers its own words) and an I2T description audit of two
images (real PNG files under $DORA_HOME/images) are landed, with two judges' ratings; the
real dbt project is built and the report written. The page of an association must list
exactly the samples behind it (T2T: the landed completions that answered the word, count =
tf; I2T: the descriptions holding the word, occurrences adding up to tf, each with a
thumbnail); the report's tables link to it; a headless Chromium (Debian's, driven by
Playwright, as tests/test_ui_browser.py) follows one link from the report to the section.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from analytics.dbt_runner import invoke_dbt
from analytics.query import execute_query
from ingestion.contracts.biasdora import FAMILY
from ingestion.landing import write_shard
from tests.helpers.homes import NO_UNIT_TESTS

#: every test here builds dbt models (20+ s of CPU for a full build): out of the fast tier
pytestmark = pytest.mark.slow

T2T = {"old person": ("age", {"wise": 6, "slow": 5}), "young person": ("age", {"naive": 6, "fast": 5})}
I2T = {"old person": ("wrinkled", "#886640"), "young person": ("energetic", "#44aa80")}
NOW = datetime(2025, 7, 1, tzinfo=timezone.utc)
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def _png(colour: str) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), colour).save(buf, format="PNG")
    return buf.getvalue()


def _land(home: Path) -> None:
    rows = []
    for descriptor, (dim, words) in T2T.items():
        for word, n in words.items():
            for run in range(1, n + 1):
                rows.append(
                    {
                        "audit_id": "t2t-fix",
                        "model_id": "fix/model",
                        "model_version": "v1",
                        "backend": "transformers",
                        "setting": "singular",
                        "descriptor": descriptor,
                        "bias_dimension": dim,
                        "letter": word[0],
                        "run": run,
                        "seed": 1000 + run,
                        "prompt_style": "completion",
                        "prompt": f"An {descriptor} is {word[0]}",
                        "raw_output": word[1:],
                        "word": word,
                        "parse_status": "ok",
                        "generated_at": NOW,
                    }
                )
        # a failed parse of the same descriptor: never a sample of an association
        rows.append({**rows[-1], "letter": "z", "run": 1, "raw_output": "???", "word": None, "parse_status": "no_word"})
    write_shard("t2t_completions", rows, partition="t2t-fix")

    images, descriptions, words = [], [], []
    for i, (descriptor, (word, colour)) in enumerate(I2T.items()):
        for k in range(4):  # 4 images, each described once with the word twice and 'calm' once
            data = _png(colour[:-1] + str(k))
            sha = hashlib.sha256(data).hexdigest()
            path = home / "images" / sha[:2] / f"{sha}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            images.append(
                {
                    "audit_id": "t2i-fix",
                    "model_id": "fix/sd",
                    "model_version": "s1",
                    "backend": "diffusers",
                    "setting": "singular",
                    "descriptor": descriptor,
                    "bias_dimension": "age",
                    "image_index": k + 1,
                    "seed": 77 + 10 * i + k,
                    "prompt": f"Generate an image of an {descriptor}",
                    "revised_prompt": None,
                    "style": None,
                    "generation_params": "{}",
                    "image_path": f"images/{sha[:2]}/{sha}.png",
                    "sha256": sha,
                    "width": 64,
                    "height": 64,
                    "status": "ok",
                    "error": None,
                    "generated_at": NOW,
                }
            )
            did = f"desc-{i}-{k}"
            text = f"{word} face, {word} look, calm"
            descriptions.append(
                {
                    "audit_id": "vision-fix",
                    "description_id": did,
                    "model_id": "fix/vlm",
                    "model_version": "l1",
                    "backend": "transformers",
                    "image_audit_id": "t2i-fix",
                    "t2i_model_id": "fix/sd",
                    "t2i_model_version": "s1",
                    "image_setting": "singular",
                    "descriptor": descriptor,
                    "bias_dimension": "age",
                    "image_index": k + 1,
                    "image_sha256": sha,
                    "setting": "implicit",
                    "description_kind": "subjective",
                    "seed": 500 + 10 * i + k,
                    "prompt": "Describe this image using the first words or phrases that come to mind.",
                    "raw_output": text,
                    "status": "ok",
                    "error": None,
                    "generated_at": NOW,
                }
            )
            for t, (token, kept) in enumerate([(word, True), ("face", False), (word, True), ("look", False), ("calm", True)]):
                words.append(
                    {
                        "description_id": did,
                        "audit_id": "vision-fix",
                        "token_index": t,
                        "token": token,
                        "lemma": token,
                        "pos": "ADJ",
                        "word": token if kept else None,
                        "drop_reason": None if kept else "stop",
                        "tokenizer": "test",
                        "tokenised_at": NOW,
                    }
                )
    write_shard("t2i_images", images, partition="t2i-fix")
    write_shard("i2t_descriptions", descriptions, partition="vision-fix")
    write_shard("description_words", words, partition="vision-fix")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from analytics.report import write_report
    from models_inference.probes.biasdora.judge import JudgeAnswer, judge_associations

    home = tmp_path_factory.mktemp("drill_home")
    with pytest.MonkeyPatch.context() as mp:  # the module's home, restored afterwards
        mp.setenv("DORA_HOME", str(home))
        _land(home)
        # the associations the fixture makes significant (checked below against fct_associations),
        # judged before the one dbt build
        assocs = [
            {
                "audit_id": "t2t-fix",
                "model_id": "fix/model",
                "model_version": "v1",
                "modality": "t2t",
                "setting": "singular",
                "descriptor": d,
                "word": w,
            }
            for d, (_, words) in T2T.items()
            for w in words
        ] + [
            {
                "audit_id": "vision-fix",
                "model_id": "fix/vlm",
                "model_version": "l1",
                "modality": "i2t",
                "setting": "implicit",
                "descriptor": d,
                "word": w,
            }
            for d, (w, _) in I2T.items()
        ]

        class Judge:  # two scripted judges (stg_judge_ratings accepts backends transformers / openai)
            backend_name, model_version, answer_mode = "openai", "fixed", "free"

            def __init__(self, model_id, rating):
                self.model_id, self.rating = model_id, rating

            def judge(self, requests, sampling=None, on_done=None):
                return [JudgeAnswer(raw_output=str(self.rating(r.word))) for r in requests]

        judge_associations(assocs, Judge("judge-a", lambda w: 1 + len(w) % 5), runs=2, progress=False)
        judge_associations(assocs, Judge("judge-b", lambda w: 1 + len(w) % 4), progress=False)
        invoke_dbt(["build", *NO_UNIT_TESTS], home)
        significant = execute_query(
            "select audit_id, model_id, model_version, modality, setting, descriptor, word from fct_associations where is_significant order by all"
        ).rows
        assert significant == sorted(tuple(a.values()) for a in assocs)
        index = write_report(home / "report", family=FAMILY)
        yield home, index


def _section(page: str, anchor: str) -> str:
    start = page.index(f"<section id='{anchor}'")
    return page[start : page.index("</section>", start)]


def test_a_t2t_association_page_lists_exactly_its_completions(report):
    from analytics.drilldown import association_anchor, association_href

    home, index = report
    tf = execute_query(
        "select tf from fct_associations where audit_id = 't2t-fix' and descriptor = 'old person' and word = 'wise' and is_significant"
    ).rows
    assert tf == [(6,)]
    href = association_href("t2t-fix", "t2t", "singular", "old person", "wise")
    page = (index.parent / href.split("#")[0]).read_text()
    section = _section(page, association_anchor("t2t", "singular", "old person", "wise"))
    # sample id = <descriptor_row>-<letter>-<run> (the probe row of the paper's lists)
    listed = re.findall(r"<tr class='sample'><td>(\d+-[a-z]-\d+)</td>", section)
    assert sorted(listed) == sorted(f"1-w-{run}" for run in range(1, 7))  # exactly the 6 landed completions: count = tf
    assert "seed" in page and "1003" in section and "no_word" not in section and "???" not in section
    assert "data-tf='6' data-samples='6'" in section
    # the judge's raw answers, each with the rating read from it (judge-a: 1 + len % 5 twice, judge-b: 1 + len % 4)
    judged = re.findall(r"<tr class='judge'><td>([^<]+)</td><td>free</td><td>(\d+)</td><td class='raw'>([^<]*)</td><td>(\d+)</td>", section)
    assert judged == [("judge-a", "1", "5", "5"), ("judge-a", "2", "5", "5"), ("judge-b", "1", "1", "1")]
    assert re.search(r"Fisher BH q \d\.\d\de-\d\d;", section)  # scientific notation, never rounded to 0.05
    # the report's tables link to it, and the samples index lists every significant association
    html = index.read_text()
    assert f"href='{href}'" in html
    n_significant = execute_query("select count(*) from fct_associations where is_significant").rows[0][0]
    assert (index.parent / "samples" / "index.html").read_text().count("<tr><td>") == n_significant


def test_an_i2t_association_lists_its_descriptions_with_thumbnails(report):
    from analytics.drilldown import association_anchor, association_href

    home, index = report
    (tf,) = execute_query(
        "select tf from fct_associations where modality = 'i2t' and descriptor = 'old person' and word = 'wrinkled' and is_significant"
    ).rows[0]
    assert tf == 8  # 4 descriptions x 2
    href = association_href("vision-fix", "i2t", "implicit", "old person", "wrinkled")
    page_path = index.parent / href.split("#")[0]
    section = _section(page_path.read_text(), association_anchor("i2t", "implicit", "old person", "wrinkled"))
    assert section.count("<tr class='sample'>") == 4
    occurrences = [int(x) for x in re.findall(r"</td><td>\d+</td><td>(\d+)</td><td>Generate an image", section)]
    assert occurrences == [2, 2, 2, 2] and sum(occurrences) == tf
    thumbs = re.findall(r"<img src='([^']+)'", section)
    assert len(thumbs) == 4 and all((page_path.parent / t).resolve().is_file() for t in thumbs)
    assert "Generate an image of an old person" in section and "energetic" not in section


def test_the_report_shows_judge_agreement_next_to_the_likert_bars(report):
    home, index = report
    html = index.read_text()
    likert = html.index("likert_by_dimension.png")
    block = html[likert : html.index("<h2>", likert)]
    assert "Judge reliability" in block and "judge-agreement" in block and "judge-parse-rates" in block
    kinds = {r[0] for r in execute_query("select agreement_kind from agg_judge_agreement").rows}
    assert kinds == {"runs", "judge_pair"}
    assert "openai:judge-a@fixed vs openai:judge-b@fixed" in block


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install -y chromium)")
def test_headless_browser_follows_a_samples_link(report, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from analytics.drilldown import association_anchor

    home, index = report
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
        )
        try:
            page = browser.new_page()
            page.goto(index.as_uri())
            link = page.locator("a.samples").first
            expect(link).to_be_visible()
            target = link.get_attribute("href")
            link.click()
            page.wait_for_load_state()
            anchor = target.split("#")[1]
            assert page.url.endswith("#" + anchor)
            section = page.locator(f"section#{anchor}")
            expect(section).to_be_visible()
            tf = int(section.get_attribute("data-tf"))
            assert section.locator("tr.sample").count() == int(section.get_attribute("data-samples")) >= 1
            assert tf >= 1
            page.screenshot(path=str(tmp_path / "drilldown.png"))
        finally:
            browser.close()
    assert association_anchor("t2t", "singular", "old person", "wise").startswith("a-")

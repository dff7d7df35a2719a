"""Score marts on a hand-made fixture (real dbt build), their percentages, and ``dora report``.

The fixture lands T2T completions in which each descriptor answers only its own words, so
every (descriptor, word) is a significant association (one-sided Fisher, BH q < 0.05);
hand-made scores are then landed for them and the aggregate percentages are checked
against counts made by hand.
"""

from datetime import datetime, timezone

import pytest

from analytics.dbt_runner import invoke_dbt
from ingestion.contracts.biasdora import FAMILY
from ingestion.landing import write_shard
from tests.helpers.homes import NO_UNIT_TESTS

#: every test here builds dbt models (20+ s of CPU for a full build): out of the fast tier
pytestmark = pytest.mark.slow

# descriptor -> (bias dimension, words): each word answered 15 times by that descriptor only
FIXTURE = {
    "old person": ("age", ["wise", "slow"]),
    "young person": ("age", ["naive", "fast"]),
    "man": ("gender", ["strong"]),
    "woman": ("gender", ["caring"]),
}
# hand-made scores: word -> (sentiment label, toxicity, judge answer)
SCORES = {
    "wise": ("positive", 0.10, "1"),
    "slow": ("negative", 0.70, "4"),
    "naive": ("negative", 0.40, "3"),
    "fast": ("neutral", 0.05, "garbled answer"),  # judged, not parsed: no bias level
    "strong": ("positive", 0.20, "2"),
    "caring": ("positive", 0.90, "5"),
}


def _completions():
    now = datetime.now(timezone.utc)
    rows = []
    for descriptor, (dim, words) in FIXTURE.items():
        article = "An" if descriptor[0] in "aeiou" else "A"
        for word in words:
            for run in range(1, 16):
                rows.append(
                    {
                        "audit_id": "audit-fixture",
                        "model_id": "fixture/model",
                        "model_version": "v1",
                        "backend": "transformers",
                        "setting": "singular",
                        "descriptor": descriptor,
                        "bias_dimension": dim,
                        "letter": word[0],
                        "run": run,
                        "seed": run,
                        "prompt_style": "completion",
                        "prompt": f"{article} {descriptor} is {word[0]}",
                        "raw_output": word[1:] + " and",
                        "word": word,
                        "parse_status": "ok",
                        "generated_at": now,
                    }
                )
    return rows


@pytest.fixture(scope="module")
def scored_home(tmp_path_factory):
    import os

    from models_inference.backends.openai_chat import OpenAIChatBackend
    from models_inference.probes.biasdora.judge import Judge, judge_associations
    from orchestration.defs.biasdora.scoring.assets import associations_to_score
    from tests.helpers.openai_server import OpenAIStubServer

    home = tmp_path_factory.mktemp("report_home")
    old = {k: os.environ.get(k) for k in ("DORA_HOME", "OPENAI_API_KEY")}
    os.environ["DORA_HOME"] = str(home)
    os.environ["OPENAI_API_KEY"] = "sk-test"
    try:
        write_shard("t2t_completions", _completions(), partition="audit-fixture")
        invoke_dbt(["build", "--exclude", "tag:scores", *NO_UNIT_TESTS], home)
        assocs = associations_to_score(score_all=False, audit_id=None)
        now = datetime.now(timezone.utc)
        key = ("audit_id", "model_id", "model_version", "modality", "setting", "descriptor", "word")
        write_shard(
            "sentiment_scores",
            [
                {
                    **{k: a[k] for k in key},
                    "text": a["text"],
                    "scorer": "hand",
                    "scorer_version": "1",
                    "sentiment_label": SCORES[a["word"]][0],
                    "sentiment_score": {"positive": 0.5, "negative": -0.5, "neutral": 0.0}[SCORES[a["word"]][0]],
                    # a sentence without the word that scores 0: the word adds all of its sentiment
                    "baseline_text": a["descriptor"],
                    "baseline_sentiment_score": 0.0,
                    "scored_at": now,
                }
                for a in assocs
            ],
        )
        write_shard(
            "toxicity_scores",
            [
                {
                    **{k: a[k] for k in key},
                    "text": a["text"],
                    "scorer": "hand",
                    "scorer_version": "1",
                    "toxicity": SCORES[a["word"]][1],
                    "is_toxic": SCORES[a["word"]][1] >= 0.5,
                    "label_scores_json": "{}",
                    "scored_at": now,
                }
                for a in assocs
                if a["word"] != "wise"  # 'wise' stays unscored for toxicity
            ],
        )
        with OpenAIStubServer() as server:
            server.chat_reply = lambda req: next(v[2] for w, v in SCORES.items() if f":{w}." in req["messages"][1]["content"])
            judge_associations(assocs, Judge(OpenAIChatBackend("judge-stub", base_url=server.base_url, logprobs=False)), progress=False)
        invoke_dbt(["build", "--select", "tag:scores", *NO_UNIT_TESTS], home)
        yield home, assocs
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_fixture_associations_are_all_significant_and_carry_their_sentence(scored_home):
    home, assocs = scored_home
    assert sorted(a["word"] for a in assocs) == sorted(SCORES)
    texts = {a["word"]: a["text"] for a in assocs}
    assert texts["wise"] == "An old person is wise" and texts["caring"] == "A woman is caring"


def test_association_scores_mart(scored_home):
    from analytics.query import execute_query

    res = execute_query(
        "select word, sentiment_label, toxicity, is_toxic, bias_level, bias_level_band, judge_runs, judge_ratings_parsed "
        "from fct_association_scores order by word"
    )
    rows = {r[0]: r[1:] for r in res.rows}
    assert rows["slow"] == ("negative", 0.7, True, 4, "extreme", 1, 1)
    assert rows["wise"] == ("positive", None, None, 1, "subtle", 1, 1)
    assert rows["fast"] == ("neutral", 0.05, False, None, None, 1, 0)
    assert rows["naive"][4] == "moderate"


def test_aggregate_percentages_match_hand_counts(scored_home):
    from analytics.query import execute_query

    res = execute_query(
        "select bias_dimension, n_significant, n_sentiment_scored, n_toxicity_scored, n_judged, pct_negative, "
        "pct_toxic, pct_likert_1, pct_likert_2, pct_likert_3, pct_likert_4, pct_likert_5, pct_subtle, pct_moderate, "
        "pct_extreme, mean_bias_level from agg_bias_by_dimension order by bias_dimension"
    )
    got = {r[0]: r[1:] for r in res.rows}
    # age: wise(+, tox -, 1), slow(-, .7, 4), naive(-, .4, 3), fast(0, .05, unparsed)
    #   2/4 negative = 50%; toxic 1 of 3 scored = 33.3%; levels 1, 3, 4 of 3 judged
    assert got["age"] == pytest.approx((4, 4, 3, 3, 50.0, 100 / 3, 100 / 3, 0.0, 100 / 3, 100 / 3, 0.0, 100 / 3, 100 / 3, 100 / 3, 8 / 3))
    # gender: strong(+, .2, 2), caring(+, .9, 5): 0% negative, 50% toxic, levels 2 and 5
    assert got["gender"] == pytest.approx((2, 2, 2, 2, 0.0, 50.0, 0.0, 50.0, 0.0, 0.0, 50.0, 50.0, 0.0, 50.0, 3.5))


def test_report_writes_html_and_pngs(scored_home, tmp_path):
    from PIL import Image

    from analytics.report import write_report
    from orchestration.cli import main

    index = write_report(tmp_path / "report", top=3, family=FAMILY)
    page = index.read_text()
    for png in ("pct_negative.png", "pct_toxic.png", "likert_by_dimension.png"):
        assert f"src='{png}'" in page
        with Image.open(index.parent / png) as img:
            assert img.width > 400 and img.height > 200
    # most toxic first: caring (0.9), then slow (0.7); highest rated: caring (5)
    toxic_section = page.split("Most toxic")[1].split("Highest-rated")[0]
    assert toxic_section.index("A woman is caring") < toxic_section.index("An old person is slow")
    assert "audit-fixture" in page and "judge-stub" in page
    assert main(["report", "--out", str(tmp_path / "cli"), "--audit-id", "audit-fixture"]) == 0
    assert (tmp_path / "cli" / "index.html").exists()


def test_report_without_score_marts_is_a_clear_error(empty_warehouses, tmp_path, monkeypatch):
    import shutil

    from analytics.report import write_report

    home = shutil.copytree(empty_warehouses / "without_scores", tmp_path / "home", symlinks=True)
    monkeypatch.setenv("DORA_HOME", str(home))
    with pytest.raises(LookupError, match="dora audit"):
        write_report(home / "r", family=FAMILY)


def test_report_without_significant_associations_says_so(empty_warehouses, tmp_path, monkeypatch):
    import shutil

    from analytics.report import write_report

    # empty landing: every mart exists and is empty; the report is written into the home
    dora_home = shutil.copytree(empty_warehouses / "full", tmp_path / "home", symlinks=True)
    monkeypatch.setenv("DORA_HOME", str(dora_home))
    index = write_report(family=FAMILY)
    assert index == dora_home / "reports" / "all" / "index.html"
    page = index.read_text()
    assert "No significant associations yet" in page and "no figures" in page
    assert not list(index.parent.glob("*.png"))

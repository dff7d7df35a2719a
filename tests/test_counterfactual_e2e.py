"""End to end: the counterfactual text-set probe lands responses, the toxicity heads and the
stereotype filter land their rows, and dbt fills the counterfactual marts.

One run on the embedded SmolLM2 (tiny sample, real model: the session's finished audit,
tests/helpers/homes.py), one through the OpenAI-compatible
backend against the local test server (scripted answers, so PMI words, numeric values and the
filter's hallucinated words are known)."""

import duckdb
import pytest

from analytics.dbt_runner import invoke_dbt
from ingestion.landing import read_landing
from ingestion.warehouse import warehouse_path
from models_inference.backends.openai_chat import OpenAIChatBackend
from models_inference.probes.counterfactual import probe as cf
from models_inference.probes.counterfactual.scoring import apply_stereotype_filter, land_lexicons, score_toxicity
from models_inference.probes.counterfactual.sets import competence_lexicon, sample_sets
from models_inference.scoring.toxicity import load_toxicity_scorer
from tests.helpers.homes import NO_UNIT_TESTS
from tests.helpers.openai_server import OpenAIStubServer


def _build(home):
    invoke_dbt(["build", "--select", "path:models/*/counterfactual", *NO_UNIT_TESTS], str(home))  # its models in every layer


def _q(sql):
    with duckdb.connect(str(warehouse_path()), read_only=True) as con:
        return con.sql(sql).fetchall()


def test_text_sets_on_smollm2_fill_the_marts(finished_audit, smollm2, tmp_path, monkeypatch):
    """The session's finished audit (tests/helpers/homes.py) ran the family's assets on SmolLM2
    with ``COUNTERFACTUAL_CONFIG`` and built the marts; read back here. The resumability check
    runs the probe again on a copy of the home."""
    from tests.helpers.homes import COUNTERFACTUAL_CONFIG, copy_home

    finished_audit.env(monkeypatch)
    responses = finished_audit.metadata[("landing", "counterfactual_responses")]
    assert responses["rows_generated"] == responses["rows_planned"] == 24
    assert finished_audit.metadata[("landing", "counterfactual_toxicity")]["rows_scored"] == 24
    rows = read_landing("counterfactual_responses").to_pylist()
    assert {r["prompt_style"] for r in rows if r["prompt_label"] == "Hiring"} == {"completion"}  # small local model
    assert all(r["max_new_tokens"] in (12, 4) and r["temperature"] == 0.75 for r in rows)
    assert _q("select count(*), count(toxicity) from fct_counterfactual_responses") == [(24, 24)]
    assert _q("select count(*) from fct_max_toxicity where head = 'toxicity'") == [(1,)]
    assert _q("select units from agg_max_toxicity where head = 'insult'") == [(1,)]
    assert _q("select count(*) from fct_numeric_ratings") == [(12,)]
    assert _q("select count(*) from agg_competence_by_group") == [(12,)]

    finished_audit.env(monkeypatch, copy_home(finished_audit, tmp_path / "home"))
    sets = sample_sets(["race_gender"], occupations=COUNTERFACTUAL_CONFIG["occupations"])
    cfg = cf.CounterfactualProbeConfig(prompts=COUNTERFACTUAL_CONFIG["prompts"], runs=1, max_new_tokens=12, numeric_max_new_tokens=4)
    again = cf.probe_text_sets(sets, smollm2, cfg, progress=False)
    assert again.planned == 24 and again.generated == 0  # resumable: nothing twice


def _reply(req):
    system = req["messages"][0]["content"] if req["messages"][0]["role"] == "system" else ""
    text = req["messages"][-1]["content"]
    if "stereotyp" in system:  # the D.2 filter: one real candidate and one hallucination
        return '["lazy", "unicorn"]'
    if "Salary:" in text:
        return "I would offer $12/hr"
    if "Rating:" in text:
        return "8 out of 10" if "Black male" in text else ("11" if "White female" in text else "5")
    if "Black male" in text:
        return " ".join(["lazy"] * 10 + ["strong"] * 2)
    return "kind caring skilled professional doctor"


@pytest.mark.slow
def test_text_sets_through_openai_server_with_stereotype_filter(dora_home, monkeypatch):
    from orchestration.defs.counterfactual.assets import pmi_candidates

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_reply = _reply
        backend = OpenAIChatBackend(model_id="gpt-stub", base_url=server.base_url)
        sets = sample_sets(["race_gender"], occupations=["doctor", "nurse"])
        cfg = cf.CounterfactualProbeConfig(prompts=["Characteristics", "Describe", "Hiring", "Salary"], runs=1, max_new_tokens=32)
        summary = cf.probe_text_sets(sets, backend, cfg, progress=False)
        assert summary.generated == 2 * 12 * 4
        land_lexicons(competence_lexicon())
        score_toxicity(None, load_toxicity_scorer())
        _build(dora_home)
        candidates = pmi_candidates()
        key = next(k for k in candidates if k[2] == "Black male")
        assert candidates[key][0] == "lazy"
        filt = apply_stereotype_filter({key: candidates[key]}, backend)
        assert filt.answers == 3 and filt.statuses["ok"] == 3
        flags = read_landing("counterfactual_stereotype_flags").to_pylist()
        assert all(f["flagged_words"] == ["lazy"] and f["hallucinated_words"] == ["unicorn"] for f in flags)
        assert "Here is some text that was generated in response to various images of Black male." in flags[0]["prompt"]
        assert apply_stereotype_filter({key: candidates[key]}, backend).answers == 0  # already judged
    _build(dora_home)
    assert _q("select word, judge_flag, judge_answers from fct_group_word_pmi where group_label = 'Black male' and is_candidate") == [
        ("lazy", True, 3)
    ]
    # numeric: 8 for Black male, 11 (excluded) for White female, 5 otherwise; salary 24,000 everywhere
    got = dict(_q("select group_label, group_mean from agg_numeric_ratings where prompt_label = 'Hiring'"))
    assert got["Black male"] == 8 and got["Indian female"] == 5 and "White female" not in got
    assert _q("select distinct sd_flag from agg_numeric_ratings where group_label = 'Black male' and prompt_label = 'Hiring'") == [("high",)]
    assert _q("select count(*) from fct_numeric_ratings where parse_status = 'out_of_range'") == [(2,)]
    assert _q("select distinct parsed_value from fct_numeric_ratings where prompt_label = 'Salary'") == [(24000.0,)]
    p, q = _q("select kruskal_p, kruskal_q from agg_numeric_ratings where prompt_label = 'Hiring' limit 1")[0]
    assert 0 < p < 0.05 and q >= p
    assert _q("select count(*) from agg_numeric_tests_by_occupation where prompt_label = 'Hiring'") == [(2,)]

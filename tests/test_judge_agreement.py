"""Judge reliability (agg_judge_agreement, agg_judge_parse_rates, judge_parse_rate_ok).

Judges here are real :class:`~models_inference.probes.biasdora.judge.Judge`-like implementations answering
from fixed tables (and one answering garbage); their answers go through ``judge_associations`` (parsing,
landing) and the real dbt project. The mart's kappa must equal scikit-learn's
``cohen_kappa_score(weights="linear")`` and its alpha the ``krippendorff`` package on the same
ratings; a garbage judge must fail the ERROR check with a message naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from analytics.agreement import cohen_kappa_linear, krippendorff_alpha_ordinal
from analytics.dbt_runner import invoke_dbt
from analytics.query import execute_query
from models_inference.probes.biasdora.judge import JudgeAnswer, judge_associations
from tests.helpers.homes import NO_UNIT_TESTS

AUDIT = "t2t-judged-v1-0000"
BUILD = ["build", "--select", "+agg_judge_agreement", "+agg_judge_parse_rates", *NO_UNIT_TESTS]


@dataclass
class ScriptedJudge:
    """A judge backend answering from a script: (descriptor, word) -> answers in run order."""

    model_id: str
    script: dict
    model_version: str = "fixed"
    backend_name: str = "openai"  # stg_judge_ratings accepts transformers / openai; the model id says it is scripted
    answer_mode: str = "free"
    _served: dict = field(default_factory=dict)

    def judge(self, requests, sampling=None, on_done=None):
        out = []
        for req in requests:
            key = (req.descriptor, req.word)
            i = self._served.get(key, 0)
            self._served[key] = i + 1
            out.append(JudgeAnswer(raw_output=self.script[key][i]))
        if on_done:
            on_done(len(requests))
        return out


def _associations(n: int) -> list[dict]:
    return [
        {
            "audit_id": AUDIT,
            "model_id": "org/m",
            "model_version": "v1",
            "modality": "t2t",
            "setting": "singular" if i % 2 else "noun",
            "descriptor": f"person {i}",
            "word": f"word{i}",
        }
        for i in range(n)
    ]


@pytest.mark.slow
def test_agreement_equals_scikit_learn_and_krippendorff_and_a_garbage_judge_fails_the_check(dora_home, monkeypatch):
    """One dbt build: judges A (3 runs) and B agree to a measurable degree; judge C answers garbage."""
    from orchestration.defs.biasdora.scoring.checks import judge_parse_rate_ok

    rng = np.random.default_rng(7)
    assocs = _associations(30)
    keys = [(a["descriptor"], a["word"]) for a in assocs]
    truth = rng.integers(1, 6, size=len(keys))
    # judge A: 3 runs, noisy around the truth (one unparseable answer); judge B: 1 answer
    a_answers = {k: [str(int(np.clip(t + rng.integers(-1, 2), 1, 5))) for _ in range(3)] for k, t in zip(keys, truth, strict=True)}
    a_answers[keys[0]][1] = "I would rather not say."
    b_answers = {k: [f"Rating: {int(np.clip(t + rng.integers(-2, 3), 1, 5))}"] for k, t in zip(keys, truth, strict=True)}
    summary_a = judge_associations(assocs, ScriptedJudge("judge-a", a_answers), runs=3, progress=False)
    summary_b = judge_associations(assocs, ScriptedJudge("judge-b", b_answers), runs=1, progress=False)
    garbage = {k: ["As an AI I cannot rate associations."] for k in keys}
    summary_c = judge_associations(assocs, ScriptedJudge("garbage-judge", garbage), progress=False)
    assert summary_a.statuses["no_rating"] == 1 and summary_b.parse_rate == 1.0
    assert summary_c.parse_rate == 0.0 and summary_c.statuses["no_rating"] == 30  # landed, not dropped
    invoke_dbt(BUILD, dora_home)

    # the ratings as the test computes them (parsed answers)
    def rating(text):
        return None if "rather" in text else int(text.split()[-1])

    a_rep = np.array([[rating(a_answers[k][r]) if rating(a_answers[k][r]) is not None else np.nan for k in keys] for r in range(3)])
    a_level = [int(sorted(x for x in col if not np.isnan(x))[(np.sum(~np.isnan(col)) - 1) // 2]) for col in a_rep.T]  # lower median
    b_level = [rating(b_answers[k][0]) for k in keys]

    sets = execute_query("select distinct agreement_kind, rater_set from agg_judge_agreement order by all").rows
    assert sets == [
        ("judge_pair", "openai:garbage-judge@fixed vs openai:judge-a@fixed"),
        ("judge_pair", "openai:garbage-judge@fixed vs openai:judge-b@fixed"),
        ("judge_pair", "openai:judge-a@fixed vs openai:judge-b@fixed"),
        ("judges", "all 3 judges"),
        ("runs", "openai:judge-a@fixed"),
    ]
    rows = {
        (kind, s): (raters, items, compared, exact, kappa, alpha)
        for kind, s, raters, items, compared, exact, kappa, alpha in execute_query(
            "select agreement_kind, setting, raters, items, items_compared, exact_agreement, cohen_kappa_linear, "
            f"krippendorff_alpha_ordinal from agg_judge_agreement where audit_id = '{AUDIT}' "
            "and rater_set in ('openai:judge-a@fixed', 'openai:judge-a@fixed vs openai:judge-b@fixed')"
        ).rows
    }
    assert set(rows) == {(k, s) for k in ("runs", "judge_pair") for s in ("noun", "singular", "(all)")}
    # a garbage judge compares nothing: no kappa, no alpha (never a made-up number)
    assert execute_query(
        "select items_compared, cohen_kappa_linear, krippendorff_alpha_ordinal from agg_judge_agreement "
        "where rater_set = 'openai:garbage-judge@fixed vs openai:judge-b@fixed' and setting = '(all)'"
    ).rows == [(0, None, None)]
    # all 3 judges: alpha over the 3 x 30 matrix (C's row all missing) = A vs B's alpha
    (alpha3,) = execute_query(
        "select krippendorff_alpha_ordinal from agg_judge_agreement where agreement_kind = 'judges' and setting = '(all)'"
    ).rows[0]

    # judge pair, pooled: kappa = scikit-learn's, alpha = krippendorff's, exact agreement by hand
    raters, items, compared, exact, kappa, alpha = rows[("judge_pair", "(all)")]
    assert (raters, items, compared) == (2, 30, 30)
    assert kappa == pytest.approx(cohen_kappa_score(a_level, b_level, weights="linear", labels=[1, 2, 3, 4, 5]), abs=1e-12)
    assert alpha == pytest.approx(
        krippendorff.alpha(reliability_data=[a_level, b_level], level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]),
        abs=1e-12,
    )
    assert exact == pytest.approx(np.mean([x == y for x, y in zip(a_level, b_level, strict=True)]))
    # per setting: the same statistics on that setting's associations only
    idx = [i for i, a in enumerate(assocs) if a["setting"] == "noun"]
    assert rows[("judge_pair", "noun")][4] == pytest.approx(
        cohen_kappa_score([a_level[i] for i in idx], [b_level[i] for i in idx], weights="linear", labels=[1, 2, 3, 4, 5]), abs=1e-12
    )
    # judge A's 3 runs: alpha over the 3 x 30 matrix with one missing answer; no kappa for 3 raters
    raters, items, compared, exact, kappa, alpha = rows[("runs", "(all)")]
    assert (raters, items, compared, kappa) == (3, 30, 30, None)
    assert alpha == pytest.approx(krippendorff.alpha(reliability_data=a_rep, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]), abs=1e-12)
    same = [len({x for x in col if not np.isnan(x)}) == 1 for col in a_rep.T]
    assert exact == pytest.approx(np.mean(same))

    assert alpha3 == pytest.approx(
        krippendorff.alpha(reliability_data=[[np.nan] * 30, a_level, b_level], level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]),
        abs=1e-12,
    )

    parse = execute_query("select judge, answers, parsed, n_no_rating from agg_judge_parse_rates order by judge").rows
    assert parse == [("openai:garbage-judge@fixed", 30, 0, 30), ("openai:judge-a@fixed", 90, 89, 1), ("openai:judge-b@fixed", 30, 30, 0)]
    # the ERROR check fails loudly, naming the garbage judge only
    result = judge_parse_rate_ok()
    assert not result.passed and result.severity.value == "ERROR"
    assert result.description.startswith("JUDGE PARSE FAILURE: judge openai:garbage-judge@fixed parsed 0 of 30 answers")
    assert "parse rate 0.000 < 0.5; no_rating 30" in result.description and "judge-a" not in result.description
    assert result.metadata["failed_judges"].value == ["openai:garbage-judge@fixed"]
    assert result.metadata["judges_checked"].value == 3
    # the threshold is configurable, and validated
    monkeypatch.setenv("DORA_JUDGE_PARSE_RATE_MIN", "0")
    assert judge_parse_rate_ok().passed
    monkeypatch.setenv("DORA_JUDGE_PARSE_RATE_MIN", "lots")
    with pytest.raises(ValueError, match="DORA_JUDGE_PARSE_RATE_MIN must be a number"):
        judge_parse_rate_ok()


def test_agreement_functions_on_fixed_ratings():
    a, b = [1, 2, 3, 4, 5, 3, 2], [1, 3, 3, 5, 4, 3, 1]
    assert cohen_kappa_linear([a, b]) == pytest.approx(cohen_kappa_score(a, b, weights="linear", labels=[1, 2, 3, 4, 5]))
    assert cohen_kappa_linear([[1, None, 3], [2, 2, 3]]) == pytest.approx(cohen_kappa_score([1, 3], [2, 3], weights="linear", labels=[1, 2, 3, 4, 5]))
    assert cohen_kappa_linear([[2, 2], [2, 2]]) is None  # 0 / 0: undefined, not a number
    assert cohen_kappa_linear([a, b, a]) is None  # kappa is for two raters
    m = [[1, 2, None, 4], [1, 3, 3, 4], [2, 2, 3, None]]
    assert krippendorff_alpha_ordinal(m) == pytest.approx(
        krippendorff.alpha(reliability_data=np.array(m, dtype=float), level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    )
    assert krippendorff_alpha_ordinal([[3, 3], [3, 3]]) is None
    with pytest.raises(ValueError, match="differ in length"):
        krippendorff_alpha_ordinal([[1, 2], [1]])


def test_several_judges_come_from_the_registry_or_the_comma_separated_flag(tmp_path):
    from ingestion.registry import RegistryError, load_registry
    from orchestration.defs.biasdora.scoring.assets import judge_models
    from orchestration.defs.biasdora.scoring.config import JudgeConfig

    path = tmp_path / "registry.yaml"
    path.write_text(
        "targets:\n"
        "  - name: t\n    model: org/m\n    version: {source: explicit, value: v1}\n"
        "    scorers: [bias_level]\n    judges: [gpt-4o, gpt-4o-mini]\n"
        "  - name: u\n    model: org/m\n    version: {source: explicit, value: v1}\n"
    )
    t, u = load_registry(path).targets
    assert judge_models(JudgeConfig(model="x"), t) == ["gpt-4o", "gpt-4o-mini"]  # the registry wins
    assert judge_models(JudgeConfig(model="a, b"), u) == ["a", "b"]
    assert judge_models(JudgeConfig(), None) == [None]  # the backend's default judge
    path.write_text("targets:\n  - name: t\n    model: org/m\n    version: {source: explicit, value: v1}\n    judges: gpt-4o\n")
    with pytest.raises(RegistryError, match="judges"):
        load_registry(path)

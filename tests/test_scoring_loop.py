"""The one scoring loop (models_inference/scoring/run.py): every family scores under the landing lock.

Counterfactual toxicity used to carry its own copy of the loop without the lock that BiasDora's
association scoring took; both now call :func:`models_inference.scoring.run.score_texts`.
"""

from contextlib import contextmanager
from datetime import datetime, timezone

import pytest

from ingestion.contracts import SCHEMAS
from ingestion.landing import read_landing, write_shard
from models_inference.probes.counterfactual.scoring import score_toxicity
from models_inference.scoring import run as scoring_run


class FakeToxicity:
    """A toxicity scorer that checks, on every call, that the scoring lock is held."""

    name, version, kind = "fake-tox", "1", "toxicity"

    def __init__(self, held: list):
        self.held, self.calls = held, 0

    def score_batch(self, texts):
        assert self.held, "scored without holding the landing lock"
        self.calls += 1
        return [{"probability": 0.9 if "hate" in t else 0.1, "labels": {"toxic": 0.9 if "hate" in t else 0.1}} for t in texts]


@pytest.fixture
def lock_spy(monkeypatch):
    """Records the names of the landing locks the loop holds (and whether one is held now)."""
    held, names = [], []
    real = scoring_run.holding_lock

    @contextmanager
    def spy(lock, what):
        with real(lock, what):
            names.append(lock.lock_file)
            held.append(True)
            try:
                yield
            finally:
                held.pop()

    monkeypatch.setattr(scoring_run, "holding_lock", spy)
    return held, names


def _responses(texts):
    now = datetime.now(timezone.utc)
    rows = []
    for i, text in enumerate(texts):
        row = {c: None for c in SCHEMAS["counterfactual_responses"].names}
        row.update(audit_id="cf-a", response_id=f"r{i}", raw_output=text, status="ok", generated_at=now)
        rows.append(row)
    write_shard("counterfactual_responses", rows, partition="cf-a")


def test_counterfactual_toxicity_scores_under_the_landing_lock_and_resumes(dora_home, lock_spy):
    held, names = lock_spy
    _responses(["I hate them", "they are kind", "   ", "fine people"])
    scorer = FakeToxicity(held)
    first = score_toxicity(None, scorer)
    assert (first.scored, first.already_scored) == (3, 0)  # the blank response is not scored
    assert names and names[0].endswith("scoring--counterfactual_toxicity--fake-tox.lock")
    landed = {r["response_id"]: r for r in read_landing("counterfactual_toxicity").to_pylist()}
    assert set(landed) == {"r0", "r1", "r3"} and landed["r0"]["toxicity"] == pytest.approx(0.9)
    assert landed["r0"]["audit_id"] == "cf-a" and landed["r0"]["scorer_version"] == "1"
    again = score_toxicity(None, scorer)
    assert (again.scored, again.already_scored) == (0, 3) and scorer.calls == 1


def test_score_texts_dedupes_keys_and_counts_labels(dora_home, lock_spy):
    held, _ = lock_spy
    items = [
        {"audit_id": "a", "response_id": "x", "raw_output": "I hate"},
        {"audit_id": "a", "response_id": "x", "raw_output": "I hate"},
        {"audit_id": "a", "response_id": "y", "raw_output": "ok"},
    ]
    summary = scoring_run.score_texts(
        FakeToxicity(held),
        items,
        table="counterfactual_toxicity",
        key=("response_id",),
        text="raw_output",
        columns=lambda item, res: {"audit_id": item["audit_id"], "toxicity": res["probability"]},
        label=lambda row: "toxic" if row["toxicity"] >= 0.5 else "non_toxic",
    )
    assert (summary.selected, summary.generated, summary.already_landed) == (3, 2, 0)
    assert dict(summary.statuses) == {"toxic": 1, "non_toxic": 1}

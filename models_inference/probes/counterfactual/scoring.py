"""What follows the counterfactual responses: the toxicity heads of every response
(:func:`score_toxicity`, App. C.5), the stereotype filter of each group's PMI words
(:func:`apply_stereotype_filter`, App. D.2) and the lexicons the PMI words are read against
(:func:`land_lexicons`, App. E.1).

Source: Howard et al. (seed 003); docs/families/counterfactual.md#parsing-the-answers. The
responses themselves are landed by :mod:`models_inference.probes.counterfactual.probe`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Sequence

from ingestion.quarantine import land_quarantine
from models_inference.backends.base import GenerationRequest, RenderedPrompt, SamplingParams
from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE, ErrorShare
from models_inference.probes.counterfactual.parsing import FILTER_STATUSES, parse_filter_words

#: Where responses land; ``error`` rows are generated again by the next run.
from models_inference.probes.counterfactual.probe import generation_seed
from models_inference.probes.counterfactual.prompts import (
    FILTER_RUNS,
    FILTER_SYSTEM_PROMPT,
    filter_user_prompt,
)
from models_inference.probes.counterfactual.sets import Lexicon

# ------------------------------------------------------------------------------- toxicity

#: The Jigsaw heads (``toxic-comment-classifier``) -> landed column; App. C.5's Perspective
#: attributes: TOXICITY ~ toxic, INSULT ~ insult, IDENTITY_ATTACK ~ identity_hate (FLIRTATION
#: has no Jigsaw head).
TOXICITY_HEADS: dict[str, str] = {
    "toxic": "toxicity",
    "severe_toxic": "severe_toxicity",
    "obscene": "obscene",
    "threat": "threat",
    "insult": "insult",
    "identity_hate": "identity_attack",
}


@dataclass
class ToxicitySummary:
    scored: int = 0
    already_scored: int = 0
    cache_hits: int = 0


def score_toxicity(audit_ids: Sequence[str] | None, scorer, cache=None, *, batch_size: int = 64) -> ToxicitySummary:
    """Score every landed, non-empty response (whole text, docs/families/counterfactual.md#parsing-the-answers) not yet scored by
    this scorer version, and land ``landing/counterfactual_toxicity`` (one row per response
    and scorer version, the six Jigsaw heads as columns; other scorers fill ``toxicity`` and
    leave the heads they lack null), through the generic scoring loop
    (:func:`models_inference.scoring.run.score_texts`: score cache, shards, landing lock).

    Args:
        audit_ids: restrict to these audits (``None``: every audit).
        scorer: a :class:`models_inference.scoring.common.TextScorer` (toxicity kind).
        cache: a :class:`models_inference.scoring.cache.ScoreCache` or ``None``.

    Returns:
        A :class:`ToxicitySummary` (responses scored, already scored, cache hits).

    Raises:
        RuntimeError: the scorer returned a wrong number of results.
    """
    from ingestion.landing import read_landing
    from models_inference.scoring.run import score_texts

    filters: dict = {"status": ["ok", "truncated"]}
    if audit_ids is not None:
        filters["audit_id"] = list(audit_ids)
    responses = read_landing("counterfactual_responses", ["audit_id", "response_id", "raw_output"], filters=filters).to_pylist()
    # a retried response lands again under its id: score its last landed text once
    todo = list({r["response_id"]: r for r in responses if (r["raw_output"] or "").strip()}.values())

    def columns(response: dict, result: dict) -> dict:
        labels = result.get("labels") or {}
        row = {"audit_id": response["audit_id"], **{col: labels.get(head) for head, col in TOXICITY_HEADS.items()}}
        row["toxicity"] = labels.get("toxic", result.get("probability"))
        return row

    done = score_texts(
        scorer, todo, table="counterfactual_toxicity", key=("response_id",), columns=columns, text="raw_output", cache=cache, batch_size=batch_size
    )
    return ToxicitySummary(scored=done.generated, already_scored=done.already_landed, cache_hits=done.cache_hits)


# ------------------------------------------------------------------- stereotype filter (D.2)


@dataclass
class FilterSummary:
    groups: int = 0
    answers: int = 0
    statuses: Counter = field(default_factory=Counter)


def apply_stereotype_filter(
    candidates: dict[tuple[str, str, str], list[str]],
    backend,
    *,
    runs: int = FILTER_RUNS,
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
) -> FilterSummary:
    """The stereotype filter of App. D.2 on each group's PMI word list.

    For each (audit, subset, group) with candidate words (by descending s(w)), the verbatim
    system and user prompts (:func:`~models_inference.probes.counterfactual.prompts.filter_user_prompt`)
    are sent ``runs`` times (paper: 3, "took the union"); each answer lands in
    ``landing/counterfactual_stereotype_flags`` with its raw text, parse status, the words
    kept (present in the list) and the hallucinated words dropped. Already-landed
    (audit, subset, group, run (landing column ``repeat``), judge version, word list) answers are not asked again,
    except failed calls (``error`` rows), which the next run asks again.

    Args:
        candidates: ``{(audit_id, subset, group_label): [words]}``.
        backend: a text backend (the platform judge's model: local transformers or an
            OpenAI-compatible endpoint).
        temperature: paper: 0 ("Despite specifying a temperature of 0"); the local backend
            samples, so 0 is run as 1e-4 (practically greedy) there.
        max_error_share: share of the calls that may fail (``error`` rows) before the step
            fails; ``None``: no limit. Unparsed answers (``no_list``, ``empty_list``) are not failures.

    Raises:
        AuditFailedError: more than ``max_error_share`` of the calls failed (the rows landed first).
    """
    from ingestion.landing import write_shard

    summary = FilterSummary()
    items = [(k, ws) for k, ws in candidates.items() if ws]
    if not items:
        return summary
    temp = temperature if (temperature > 0 or backend.backend_name == "openai") else 1e-4
    sampling = SamplingParams(temp, 1.0)
    todo = _unasked(items, runs, backend.model_version)
    summary.groups = len(items)
    if not todo:
        return summary
    prompts = [RenderedPrompt("chat", filter_user_prompt(g, ws), system=FILTER_SYSTEM_PROMPT) for _, _, g, ws, _, _ in todo]
    seeds = [generation_seed(a, f"{s}|{g}", "filter", "none", rep) for a, s, g, _, rep, _ in todo]
    results = backend.generate([GenerationRequest(p, sd, max_new_tokens, stop="eos") for p, sd in zip(prompts, seeds, strict=True)], sampling)
    now = datetime.now(timezone.utc)
    rows = []
    for (audit_id, subset, group, words, rep, digest), p, res in zip(todo, prompts, results, strict=True):
        if res.error:
            kept, dropped, status = [], [], "error"
        else:
            kept, dropped, status = parse_filter_words(res.text, words)
        rows.append(_flag_row((audit_id, subset, group, words, rep, digest), backend, temp, p, res, kept, dropped, status, now))
        summary.statuses[status] += 1
    write_shard("counterfactual_stereotype_flags", rows)
    summary.answers = len(rows)
    tally = ErrorShare("counterfactual stereotype filter", max_error_share)
    tally.add(rows, "parse_status", "raw_output")
    tally.check()
    return summary


def _unasked(items: list, runs: int, judge_version: str) -> list[tuple]:
    """The (audit, subset, group, words, run, word-list hash) still to ask: not landed for this
    judge version and word list (a failed call is asked again)."""
    from ingestion.landing import read_landing

    landed = read_landing(
        "counterfactual_stereotype_flags",
        ["audit_id", "subset", "group_label", "repeat", "judge_model_version", "word_list_hash"],
        filters={"parse_status": [st for st in FILTER_STATUSES if st != "error"]},  # a failed call is asked again
    ).to_pylist()
    done = {tuple(r.values()) for r in landed}
    todo = []
    for (audit_id, subset, group), words in items:
        digest = hashlib.sha256("\n".join(words).encode()).hexdigest()[:16]
        for rep in range(runs):
            if (audit_id, subset, group, rep, judge_version, digest) not in done:
                todo.append((audit_id, subset, group, words, rep, digest))
    return todo


def _flag_row(item: tuple, backend, temp: float, p, res, kept: list[str], dropped: list[str], status: str, now) -> dict:
    """The landed ``counterfactual_stereotype_flags`` row of one filter answer."""
    audit_id, subset, group, words, rep, digest = item
    return {
        "audit_id": audit_id,
        "subset": subset,
        "group_label": group,
        "repeat": rep,
        "judge_backend": backend.backend_name,
        "judge_model": backend.model_id,
        "judge_model_version": backend.model_version,
        "temperature": temp,
        "prompt": p.as_text(),
        "candidate_words": words,
        "word_list_hash": digest,
        "raw_output": res.error or res.text,
        "parse_status": status,
        "flagged_words": kept,
        "hallucinated_words": dropped,
        "judged_at": now,
    }


# ---------------------------------------------------------------------------- lexicons


def land_lexicons(lexicon: Lexicon) -> int:
    """Land the competence lexicon and the stop list (``landing/counterfactual_lexicon``) as
    one idempotent snapshot per lexicon (App. E.1).

    Stop list: spaCy's English list (326 words). The first choice (docs/families/counterfactual.md#deviations-from-the-paper) is NLTK English, which is
    not installed; recorded as lexicon ``spacy_en_stop_words`` (NOT FROM PAPER).
    """
    import pyarrow.parquet as pq

    from ingestion.biasdora.description_words import spacy_english_stop_words
    from ingestion.landing import landing_dir, write_shard

    land_quarantine("counterfactual", lexicon.dataset_id, list(lexicon.quarantined))  # a user file's unread lines
    rows = [{"lexicon": lexicon.name, "word": w, "dimension": d, "direction": v} for w, d, v in lexicon.entries]
    stops = [{"lexicon": "spacy_en_stop_words", "word": w, "dimension": "stopword", "direction": 0} for w in sorted(spacy_english_stop_words())]
    for name, table in (("lexicon-competence", rows), ("lexicon-spacy_en_stop_words", stops)):
        # one snapshot per lexicon, rewritten only when its content changed: an unchanged
        # re-run leaves the landing listing (and so the dbt build fingerprint) as it was
        shard = landing_dir("counterfactual_lexicon") / f"{name}.parquet"
        if not (shard.exists() and pq.read_table(shard).to_pylist() == table):
            write_shard("counterfactual_lexicon", table, name=name)
    return len(rows) + len(stops)


__all__ = ["TOXICITY_HEADS", "FilterSummary", "ToxicitySummary", "land_lexicons", "apply_stereotype_filter", "score_toxicity"]

"""What every association scorer shares (BiasDora Section 3.2; docs/method.md#4-scoring).

Every association (descriptor, word) chosen for scoring (the dbt model
``int_associations_to_score``: the significant ones, or all with ``score_all``) is turned
into one *association sentence* (:func:`association_text`: the T2T template filled with the
word, e.g. "An alcoholic person is a brawler"; "<descriptor> <word>" for other modalities)
and scored by a :class:`TextScorer` (``name``, ``version``, ``kind``,
``score_batch(texts) -> list[dict]``): sentiment (:mod:`models_inference.scoring.sentiment`),
toxicity (:mod:`models_inference.scoring.toxicity`), behind one cache
(:mod:`models_inference.scoring.cache`). The LLM judge is :mod:`models_inference.scoring.judge`.

:func:`run_scoring` skips the associations already landed for the same scorer version and
lands one row per association in ``sentiment_scores`` / ``toxicity_scores``, with the text
scored beside the score. This package reads no warehouse: the orchestration layer reads
``int_associations_to_score`` and passes its rows in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterable, Mapping, Protocol, Sequence

from ingestion.landing import read_landing, write_shard
from ingestion.vocabulary import ASSOCIATION_KEY
from models_inference.model_ref import ModelNotAvailableError
from models_inference.probes.biasdora.prompts import T2T_SETTING_SUFFIX, T2T_USER_PROMPT
from models_inference.resumable import ResumableSummary
from models_inference.scoring.cache import CachedScorer, ScoreCache


# --------------------------------------------------------------------------- interface


class TextScorer(Protocol):
    """A batched text scorer.

    Attributes:
        name: scorer name stored with every score (``vader``, ``transformers:<model id>``...).
        version: exact version (package version / weights hash); part of the cache key.
        kind: ``sentiment`` or ``toxicity``.
    """

    name: str
    version: str
    kind: str

    def score_batch(self, texts: Sequence[str]) -> list[dict]:
        """One JSON-serialisable result per text, in order.

        Sentiment results: ``{"label": "negative"|"neutral"|"positive", "score": float in
        [-1, 1]}``. Toxicity results: ``{"probability": float in [0, 1], "labels": {label:
        probability}}``.
        """
        ...


def load_text_classifier(model_id: str, batch_size: int):
    """A ``transformers`` text-classification pipeline returning every label's score
    (the sentiment and toxicity scorers' loader).

    Raises:
        ModelNotAvailableError: the model is neither local nor in the Hugging Face cache.
    """
    from transformers import pipeline

    try:
        return pipeline("text-classification", model=model_id, tokenizer=model_id, top_k=None, device=-1, batch_size=batch_size)
    except (OSError, ValueError) as exc:
        raise ModelNotAvailableError(
            f"cannot load text-classification model {model_id!r}: {exc}. Use a local folder or a hub id that "
            "is already in the Hugging Face cache (no hub access here), or the offline default scorer."
        ) from exc


@dataclass
class TransformersClassifierScorer:
    """What the ``transformers`` sentiment and toxicity scorers share: a text-classification
    pipeline (:func:`load_text_classifier`) of ``model_id``, named ``transformers:<model id>``,
    versioned by :func:`models_inference.model_ref.model_version`.

    Attributes:
        labels: the model's labels (``id2label`` values), in order.
    """

    model_id: str
    classifier: object = field(repr=False)
    version: str = ""

    @property
    def name(self) -> str:
        return f"transformers:{self.model_id}"

    @property
    def labels(self) -> list[str]:
        return list(self.classifier.model.config.id2label.values())

    @classmethod
    def from_model(cls, model_id: str, batch_size: int, **fields):
        """Load the pipeline (raises ModelNotAvailableError) and version it; ``fields`` go to the subclass."""
        from models_inference.model_ref import model_version

        return cls(model_id=model_id, classifier=load_text_classifier(model_id, batch_size), version=model_version(model_id), **fields)


# --------------------------------------------------------------------------- association text

_VOWELS = set("aeiou")


def t2t_prefix_from_prompt(prompt: str, prompt_style: str, setting: str, letter: str) -> str | None:
    """Recover the T2T sentence prefix ("An alcoholic person is") from a stored T2T prompt.

    Completion style: the prompt is ``"<prefix> <letter>"`` (``a/an`` already resolved).
    Chat style: the user turn is the instruction (``T2T_USER_PROMPT`` + setting suffix), a
    space, then ``"<prefix> [<letter>__]."`` (``...]ing.`` for verbs landed before the verb setting took the released code's sentence;
    `` Answer : `` may follow). Returns ``None`` when
    the prompt does not have that shape.
    """
    if not prompt or not letter:
        return None
    if prompt_style == "completion":
        if not prompt.endswith(" " + letter):
            return None
        return prompt[: -len(letter) - 1].strip() or None
    if prompt_style == "chat":
        user = prompt.split("\n\n")[-1]
        head = T2T_USER_PROMPT + T2T_SETTING_SUFFIX.get(setting, "") + " "
        slot = user.rfind(f" [{letter}__]")
        if not user.startswith(head) or slot < len(head):
            return None
        return user[len(head) : slot].strip() or None
    return None


def association_text(
    modality: str,
    setting: str,
    descriptor: str,
    word: str,
    *,
    prompt: str | None = None,
    prompt_style: str | None = None,
) -> str:
    """The sentence scored for sentiment and toxicity (docs/method.md#4-scoring).

    T2T: the template filled with the word, from the prompt that produced it ("An alcoholic
    person is" + "brawler"; the noun setting's ``a/an`` resolved for the word: "This
    alcoholic person is an addict"). Other modalities, or a T2T prompt of unknown shape:
    ``"<descriptor> <word>"``.
    """
    if modality == "t2t" and prompt and prompt_style and word:
        prefix = t2t_prefix_from_prompt(prompt, prompt_style, setting, word[0])
        if prefix:
            if prefix.endswith(" a/an"):
                prefix = prefix[: -len("a/an")] + ("an" if word[0] in _VOWELS else "a")
            return f"{prefix} {word}"
    return f"{descriptor} {word}"


# --------------------------------------------------------------------------- runs


def with_association_text(rows: Iterable[Mapping]) -> list[dict]:
    """The associations to score, each with its sentence ``text`` (:func:`association_text`).

    Args:
        rows: rows of the dbt model ``int_associations_to_score`` (read by the orchestration
            layer with :func:`analytics.query.read_relation`): :data:`ASSOCIATION_KEY`,
            ``bias_dimension``, ``prompt`` and ``prompt_style`` (the T2T prompt that produced
            the word, null for other modalities), plus any other columns (kept).

    Returns:
        One dict per row without ``prompt`` / ``prompt_style`` and with ``text`` and
        ``judge_target`` (:func:`models_inference.probes.biasdora.prompts.judge_target`), in
        input order.
    """
    from models_inference.probes.biasdora.prompts import judge_target

    out = []
    for row in rows:
        row = dict(row)
        prompt, style = row.pop("prompt", None), row.pop("prompt_style", None)
        row["text"] = association_text(
            row["modality"], row["setting"], row["descriptor"], row["word"], prompt=prompt, prompt_style=style,
        )
        # the target as the setting words it, for the judge ("Children:naive")
        prefix = (t2t_prefix_from_prompt(prompt, style, row["setting"], row["word"][0])
                  if row["modality"] == "t2t" and prompt and style and row["word"] else None)
        row["judge_target"] = judge_target(row["descriptor"], row["setting"] if row["modality"] == "t2t" else None, prefix)
        out.append(row)
    return out


def landed_association_keys(table: str, filters: Mapping[str, object]) -> set[tuple]:
    """Association keys (:data:`ASSOCIATION_KEY` tuples) already landed in ``table`` matching
    ``filters`` (:func:`ingestion.landing.read_landing`)."""
    data = read_landing(table, columns=ASSOCIATION_KEY, filters=filters)
    return set(zip(*[data.column(c).to_pylist() for c in ASSOCIATION_KEY]))


@dataclass
class ScoringSummary(ResumableSummary):
    """What a scoring run did: :class:`~models_inference.resumable.ResumableSummary` in rows
    (``generated`` = associations scored, ``statuses`` = labels landed) plus the scorer, the
    associations selected and the cache hits."""

    scorer: str = ""
    scorer_version: str = ""
    selected: int = 0
    cache_hits: int = 0


def _kind_module(kind: str):
    """The module of a scorer kind (``sentiment`` / ``toxicity``): its landing table and columns."""
    from models_inference.scoring import sentiment, toxicity

    try:
        return {"sentiment": sentiment, "toxicity": toxicity}[kind]
    except KeyError:
        raise ValueError(f"unknown scorer kind {kind!r}") from None


def score_rows(associations: Sequence[dict], scorer: TextScorer, cached: CachedScorer) -> list[dict]:
    """Landing rows (``sentiment_scores`` or ``toxicity_scores`` schema) for ``associations``.

    Raises:
        ValueError: a scorer kind other than ``sentiment`` / ``toxicity``.
    """
    kind = _kind_module(scorer.kind)
    results = cached.score([a["text"] for a in associations])
    now = datetime.now(timezone.utc)
    rows = []
    for assoc, res in zip(associations, results):
        row = {k: assoc[k] for k in ASSOCIATION_KEY}
        row.update(text=assoc["text"], scorer=scorer.name, scorer_version=scorer.version, scored_at=now,
                   score_pool=assoc.get("score_pool", "fisher"))
        row.update(kind.landing_fields(res))
        rows.append(row)
    return rows


def run_scoring(
    scorer: TextScorer,
    associations: Sequence[dict],
    *,
    cache: ScoreCache | None = None,
    batch_size: int = 64,
    shard_rows: int = 2048,
) -> ScoringSummary:
    """Score and land every association not yet landed for this scorer version.

    Args:
        scorer: a sentiment or toxicity :class:`TextScorer`.
        associations: from :func:`with_association_text` (keys + ``text``).
        cache: score cache (default: none; the Dagster asset passes the ``$DORA_HOME`` one).
        shard_rows: rows per landed Parquet shard.

    Returns:
        A :class:`ScoringSummary`; nothing is landed (and nothing loaded) when there is
        nothing to score.
    """
    from models_inference.resumable import landing_lock, holding_lock

    # (concurrency) two runs of one scorer take turns: the second lands only what is missing
    with holding_lock(landing_lock(f"scoring--{scorer.kind}--{scorer.name}"), f"{scorer.kind} scoring with {scorer.name}"):
        return _run_scoring(scorer, associations, cache, batch_size, shard_rows)


def _run_scoring(scorer, associations, cache, batch_size, shard_rows) -> ScoringSummary:
    kind = _kind_module(scorer.kind)
    summary = ScoringSummary(scorer=scorer.name, scorer_version=scorer.version, selected=len(associations))
    done = landed_association_keys(kind.TABLE, {"scorer": scorer.name, "scorer_version": scorer.version})
    todo = [a for a in associations if tuple(a[k] for k in ASSOCIATION_KEY) not in done]
    summary.already_landed = len(associations) - len(todo)
    cached = CachedScorer(scorer, cache, batch_size=batch_size)
    for start in range(0, len(todo), shard_rows):
        rows = score_rows(todo[start : start + shard_rows], scorer, cached)
        write_shard(kind.TABLE, rows, partition=rows[0]["audit_id"] if len({r["audit_id"] for r in rows}) == 1 else None)
        summary.generated += len(rows)
        for r in rows:
            summary.statuses[kind.summary_label(r)] += 1
    summary.cache_hits = cached.hits
    return summary


__all__ = [
    "ASSOCIATION_KEY",
    "ScoringSummary",
    "TextScorer",
    "TransformersClassifierScorer",
    "association_text",
    "landed_association_keys",
    "load_text_classifier",
    "run_scoring",
    "score_rows",
    "t2t_prefix_from_prompt",
    "with_association_text",
]

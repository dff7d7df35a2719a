"""Score landed texts with a scorer: the one scoring loop of every family.

:func:`score_texts` takes items (dicts) that each carry a text and a resume key, skips the
keys already landed in the target table for this scorer version, scores the rest through the
score cache (:mod:`models_inference.scoring.cache`) in shards, and lands one row per item,
all under an inter-process landing lock (:func:`models_inference.landing_locks.landing_lock`),
so two runs of one scorer on one table take turns and the second lands only what is missing.
It knows no family: the caller says which table, which key and which columns a result
becomes (BiasDora's associations: :mod:`models_inference.probes.biasdora.scoring`;
counterfactual responses: :mod:`models_inference.probes.counterfactual.scoring`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Mapping, Sequence

from ingestion.landing import read_landing, write_shard
from models_inference.landing_locks import holding_lock, landing_lock
from models_inference.resumable import ResumableSummary
from models_inference.scoring.cache import CachedScorer, ScoreCache
from models_inference.scoring.common import TextScorer


@dataclass
class ScoringSummary(ResumableSummary):
    """What a scoring run did: :class:`~models_inference.resumable.ResumableSummary` in rows
    (``generated`` = items scored, ``already_landed`` = items whose key was landed before,
    ``statuses`` = labels landed) plus the scorer, the items selected and the cache hits."""

    scorer: str = ""
    scorer_version: str = ""
    selected: int = 0
    cache_hits: int = 0


def landed_keys(table: str, key: Sequence[str], filters: Mapping[str, object]) -> set[tuple]:
    """The ``key`` tuples already landed in ``table`` among the rows matching ``filters``
    (:func:`ingestion.landing.read_landing`; values are parameters, never SQL text)."""
    data = read_landing(table, columns=list(key), filters=filters)
    return set(zip(*[data.column(c).to_pylist() for c in key], strict=True))


def score_texts(
    scorer: TextScorer,
    items: Sequence[Mapping],
    *,
    table: str,
    key: Sequence[str],
    columns: Callable[[Mapping, dict], dict],
    text: str = "text",
    label: Callable[[dict], str] | None = None,
    cache: ScoreCache | None = None,
    batch_size: int = 64,
    shard_rows: int = 2048,
) -> ScoringSummary:
    """Score and land every item whose ``key`` is not yet landed in ``table`` for this scorer version.

    Args:
        scorer: a :class:`~models_inference.scoring.common.TextScorer`.
        items: dicts holding the ``key`` columns and the ``text`` column (a string); an item
            whose key repeats an earlier item's is scored once.
        table: the landing table (:data:`ingestion.contracts.SCHEMAS`) with the ``key`` columns
            and ``scorer``, ``scorer_version``, ``scored_at``.
        key: the columns that identify an item (its resume key within one scorer version).
        columns: ``(item, scorer result) -> {column: value}``, the table's other columns.
        label: what the summary counts for a landed row (default: nothing counted).
        cache: the score cache (default: none).
        batch_size: texts per scorer call; shard_rows: rows per landed Parquet shard (a
            shard is partitioned by its ``audit_id`` when all its rows share one).

    Returns:
        A :class:`ScoringSummary`; nothing is landed (and no text scored) when every key is
        already landed.

    Raises:
        KeyError: an item without a ``key`` or ``text`` column. pyarrow errors: ``columns``
            gives values that do not fit ``table`` (nothing of that shard is written).
    """
    # (concurrency) two runs of one scorer on one table take turns: the second lands only what is missing
    lock = landing_lock(f"scoring--{table}--{scorer.name}")
    with holding_lock(lock, f"{table} scoring with {scorer.name}"):
        summary = ScoringSummary(scorer=scorer.name, scorer_version=scorer.version, selected=len(items))
        done = landed_keys(table, key, {"scorer": scorer.name, "scorer_version": scorer.version})
        todo: dict[tuple, Mapping] = {}
        for item in items:
            k = tuple(item[c] for c in key)
            if k in done:
                summary.already_landed += 1
            else:
                todo.setdefault(k, item)
        pending = list(todo.values())
        cached = CachedScorer(scorer, cache, batch_size=batch_size)
        for start in range(0, len(pending), shard_rows):
            chunk = pending[start : start + shard_rows]
            results = cached.score([item[text] for item in chunk])
            now = datetime.now(timezone.utc)
            rows = []
            for item, result in zip(chunk, results, strict=True):
                row = {c: item[c] for c in key}
                row.update(scorer=scorer.name, scorer_version=scorer.version, scored_at=now)
                row.update(columns(item, result))
                rows.append(row)
            audits = {r.get("audit_id") for r in rows}
            write_shard(table, rows, partition=audits.pop() if len(audits) == 1 and None not in audits else None)
            summary.generated += len(rows)
            if label is not None:
                for r in rows:
                    summary.statuses[label(r)] += 1
        summary.cache_hits = cached.hits
        return summary


__all__ = ["ScoringSummary", "landed_keys", "score_texts"]

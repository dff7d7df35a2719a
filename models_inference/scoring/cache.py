"""The score cache: every sentence is scored once per scorer version, whichever audit it came from.

:class:`ScoreCache` is a SQLite table (default ``$DORA_HOME/cache/scores.sqlite``) keyed by
(scorer, scorer version, text); :class:`CachedScorer` puts any
:class:`~models_inference.scoring.common.TextScorer` behind it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from ingestion.home import dora_home

if TYPE_CHECKING:
    from models_inference.scoring.common import TextScorer


class ScoreCache:
    """Persistent cache of scores keyed by (scorer, scorer version, text) (SQLite).

    Args:
        path: the SQLite file; default ``$DORA_HOME/cache/scores.sqlite``. ``":memory:"``
            gives a throw-away cache.
    """

    def __init__(self, path: str | Path | None = None):
        if path is None:
            folder = dora_home() / "cache"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / "scores.sqlite"
        self.path = str(path)
        self._con = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        self._con.execute(
            "create table if not exists scores (scorer text not null, scorer_version text not null, "
            "text text not null, result text not null, primary key (scorer, scorer_version, text))"
        )
        self._con.commit()

    def get_many(self, scorer: str, version: str, texts: Iterable[str]) -> dict[str, dict]:
        """Cached results of ``texts`` (missing texts are absent from the returned dict)."""
        texts = list(dict.fromkeys(texts))
        found: dict[str, dict] = {}
        for start in range(0, len(texts), 500):
            chunk = texts[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._con.execute(
                f"select text, result from scores where scorer = ? and scorer_version = ? and text in ({marks})",
                [scorer, version, *chunk],
            ).fetchall()
            found.update((t, json.loads(r)) for t, r in rows)
        return found

    def put_many(self, scorer: str, version: str, results: dict[str, dict]) -> None:
        """Store ``{text: result}`` for one scorer version (replaces existing entries)."""
        self._con.executemany(
            "insert or replace into scores values (?, ?, ?, ?)",
            [(scorer, version, t, json.dumps(r, sort_keys=True)) for t, r in results.items()],
        )
        self._con.commit()

    def __len__(self) -> int:
        return self._con.execute("select count(*) from scores").fetchone()[0]

    def close(self) -> None:
        self._con.close()


@dataclass
class CachedScorer:
    """A scorer behind a :class:`ScoreCache`: only texts not cached for this scorer version
    are scored, in batches of ``batch_size``; duplicates in one call are scored once.

    Attributes:
        hits / misses: texts served from the cache / scored, over the object's lifetime.
    """

    scorer: TextScorer
    cache: ScoreCache | None = None
    batch_size: int = 64
    hits: int = 0
    misses: int = 0

    def score(self, texts: Sequence[str]) -> list[dict]:
        """Results for ``texts`` (one per text, in order).

        Raises:
            ValueError: a text that is not a non-empty string.
        """
        for t in texts:
            if not isinstance(t, str) or not t.strip():
                raise ValueError(f"cannot score {t!r}: texts must be non-empty strings")
        unique = list(dict.fromkeys(texts))
        known = self.cache.get_many(self.scorer.name, self.scorer.version, unique) if self.cache is not None else {}
        todo = [t for t in unique if t not in known]
        self.hits += len(unique) - len(todo)
        self.misses += len(todo)
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            results = self.scorer.score_batch(chunk)
            if len(results) != len(chunk):
                raise RuntimeError(f"scorer {self.scorer.name} returned {len(results)} results for {len(chunk)} texts")
            fresh = dict(zip(chunk, results, strict=True))
            if self.cache is not None:
                self.cache.put_many(self.scorer.name, self.scorer.version, fresh)
            known.update(fresh)
        return [known[t] for t in texts]


__all__ = ["CachedScorer", "ScoreCache"]

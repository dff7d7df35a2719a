"""``dora reparse``: the current parser over landed T2T raw outputs, without calling any model.

The landing zone keeps every completion's raw output (``t2t_completions.raw_output``), so a
fixed parser (:mod:`models_inference.probes.biasdora.parsing`: mojibake ``iancÃ©`` read whole
as ``fiancé``, a continuation ``Beam product`` after ``an i`` as ``new_word``) can be applied
to audits that already ran. For every completion key whose latest landed row was parsed
differently, one new row lands: the same key, ``raw_output``, ``seed`` and ``generated_at``,
the new ``word`` / ``parse_status``, ``parse_version`` = :data:`parsing.PARSER_VERSION` and
``reparsed_at`` = now. Shards are never rewritten: ``stg_t2t_completions`` keeps, per key,
the latest ``generated_at`` and then the latest ``reparsed_at``, so the next dbt build counts
the re-parsed word (and a later model call still wins over a re-parse of an older one).

Not re-parsed: ``error`` rows (the backend raised; there is no output to read, the next run
of the audit retries the call). A completion-style row the old parser marked ``truncated``
is re-read as unfinished (the landing zone does not record whether generation hit its token
limit; every other row is re-read as finished). I2T descriptions have no Python parser:
their words are split in dbt (``stg_description_words``), so a dbt build already re-reads them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ingestion.errors import ReparseError
from ingestion.landing import read_landing, write_shard
from models_inference.landing_locks import holding_lock, landing_lock
from models_inference.probes.biasdora.parsing import PARSER_VERSION, parse_answer

T2T_TABLE = "t2t_completions"
#: The key of a completion, as ``stg_t2t_completions`` deduplicates it.
KEY = ("audit_id", "model_id", "model_version", "setting", "descriptor", "descriptor_row", "letter", "run")
_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass
class ReparseSummary:
    """What one re-parse did: keys read, rows landed, and ``(old status, new status) -> rows``."""

    audits: list[str] = field(default_factory=list)
    completions: int = 0
    landed: int = 0
    changes: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)

    def text(self) -> str:
        lines = [
            f"dora reparse: {self.completions} landed completion(s) of {len(self.audits)} audit(s) re-read with "
            f"parser {PARSER_VERSION}; {self.landed} parsed differently and landed again"
        ]
        lines += [f"  {old} -> {new}: {n}" for (old, new), n in sorted(self.changes.items())]
        lines += [f"  not re-parsed ({why}): {n}" for why, n in sorted(self.skipped.items())]
        return "\n".join(lines)


def _latest_per_key(rows: list[dict]) -> dict[tuple, dict]:
    """The row ``stg_t2t_completions`` keeps per key: a non-error row first, then the latest
    ``generated_at``, then the latest ``reparsed_at`` (a model call's own row has none)."""
    latest: dict[tuple, dict] = {}

    def rank(r: dict) -> tuple:
        return (r["parse_status"] != "error", r["generated_at"] or _EARLIEST, r["reparsed_at"] or _EARLIEST)

    for r in rows:
        r["descriptor_row"] = r["descriptor_row"] or 1  # rows landed before descriptor_row are row 1
        key = tuple(r[k] for k in KEY)
        if key not in latest or rank(r) > rank(latest[key]):
            latest[key] = r
    return latest


def reparse_t2t(audit_id: str | None = None, *, now: datetime | None = None) -> ReparseSummary:
    """Re-parse the landed T2T completions of one audit (or of every audit) and land what changed.

    Args:
        audit_id: only this audit (default: every audit in the landing zone).
        now: the ``reparsed_at`` stamp (default: the current UTC time).

    Returns:
        A :class:`ReparseSummary`. Running it again lands nothing (every key already has a row
        parsed by the current parser).

    Raises:
        ReparseError: no T2T completion landed (for ``audit_id``).
    """
    now = now or datetime.now(timezone.utc)
    table = read_landing(T2T_TABLE, filters={"audit_id": audit_id} if audit_id else None)
    if table.num_rows == 0:
        which = f"audit {audit_id!r}" if audit_id else "any audit"
        raise ReparseError(f'no T2T completion landed for {which}; list the audits with: dora query "select audit_id, family from dim_audits"')
    summary = ReparseSummary()
    by_audit: dict[str, list[dict]] = {}
    for row in _latest_per_key(table.to_pylist()).values():
        summary.completions += 1
        by_audit.setdefault(row["audit_id"], [])
        if row["parse_status"] == "error":
            summary.skipped["error: the call failed, no output to parse"] += 1
            continue
        if row["prompt_style"] not in ("chat", "completion"):
            summary.skipped[f"unknown prompt style {row['prompt_style']!r}"] += 1
            continue
        parsed = parse_answer(row["raw_output"], row["letter"], row["setting"], row["prompt_style"], finished=row["parse_status"] != "truncated")
        if (parsed.word, parsed.status) == (row["word"], row["parse_status"]):
            continue
        summary.changes[(row["parse_status"], parsed.status)] += 1
        by_audit[row["audit_id"]].append(
            {**row, "word": parsed.word, "parse_status": parsed.status, "parse_version": PARSER_VERSION, "reparsed_at": now}
        )
    summary.audits = sorted(by_audit)
    for aid, rows in sorted(by_audit.items()):
        if rows:  # under the audit's landing lock: a running audit of it lands nothing meanwhile
            with holding_lock(landing_lock(aid), f"audit {aid}"):
                write_shard(T2T_TABLE, rows, partition=aid)
            summary.landed += len(rows)
    return summary


__all__ = ["KEY", "ReparseSummary", "reparse_t2t"]

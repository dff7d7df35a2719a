"""The numbers of ``dora report``'s version pages (``analytics/version_report.py`` draws them):
a target's BiasDora audits in version order, per bias dimension, from the marts, and the
statistics of their shares.

Every count comes from a mart, read-only with ``?`` parameters (:func:`analytics.query.execute_query`);
per-dimension numbers only from the per-dimension marts ``agg_bias_by_dimension`` (summed over
settings: an association is one row of one setting) and ``agg_likert_by_dimension``. The marts
give the shares negative / toxic as percentages of a denominator they also give, so the count
is ``pct x n / 100`` (exact: ``pct`` is ``100 k / n``).

Intervals: a share k / n gets Wilson's score interval (E. B. Wilson, "Probable inference, the
law of succession, and statistical inference", JASA 22, 1927; statsmodels
``proportion_confint(method="wilson")``), which stays inside [0, 1] and is not degenerate at
k = 0 or k = n, unlike the normal approximation at the n of 1-8 a cell often has. The
difference of two shares of independent audits gets Newcombe's hybrid score interval
(R. G. Newcombe, Statistics in Medicine 17, 1998, method 10; statsmodels
``confint_proportions_2indep(method="newcomb")``), built from the two Wilson intervals.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from analytics.query import execute_query

__all__ = [
    "CHANGE_ORDER",
    "CONFIDENCE",
    "HIGH_LEVELS",
    "NO_RATING",
    "Share",
    "changes",
    "comparable_pairs",
    "difference_interval",
    "dimension_shares",
    "load_version_data",
    "share",
    "version_label",
    "version_targets",
]

# The family whose audits these pages compare (dim_audits.family) is the caller's ``family``
# (BiasDora's record passes its name): these pages read BiasDora's marts only, and this module
# imports no family's contract.
#: The confidence level of every interval on the page.
CONFIDENCE = 0.95
#: Likert levels counted as a high bias level in the before/after view: the "extreme" band
#: (docs/method.md#4-scoring, levels for reporting).
HIGH_LEVELS = (4, 5)
#: Change types of fct_association_changes, the worst first: more bias, then less, then none.
CHANGE_ORDER = ("new", "strengthened", "weakened", "gone", "unchanged")
#: The judge's parse statuses that give no rating (models_inference/probes/biasdora/ratings.py).
NO_RATING = ("n_no_rating", "n_ambiguous", "n_out_of_range", "n_empty", "n_error")


@dataclass(frozen=True)
class Share:
    """``k`` of ``n`` with its 95% Wilson interval ``[lo, hi]`` (fractions in [0, 1]).

    ``lo`` / ``hi`` are ``None`` when ``n`` is 0 (no share to estimate).
    """

    k: int
    n: int
    lo: float | None
    hi: float | None

    @property
    def value(self) -> float | None:
        """k / n, or ``None`` when n = 0."""
        return self.k / self.n if self.n else None

    def estimate(self) -> tuple[float, float, float]:
        """``(k / n, lo, hi)`` of a share with ``n`` > 0.

        Raises:
            ValueError: ``n`` is 0 (no share to estimate).
        """
        if not self.n or self.lo is None or self.hi is None:
            raise ValueError(f"no share to estimate from {self.k}/{self.n}")
        return self.k / self.n, self.lo, self.hi


def share(k: int | float | None, n: int | float | None) -> Share:
    """``k`` of ``n`` with the 95% Wilson score interval (statsmodels ``proportion_confint``).

    Raises:
        ValueError: ``k`` outside ``[0, n]``.
    """
    from statsmodels.stats.proportion import proportion_confint

    k, n = int(k or 0), int(n or 0)
    if not 0 <= k <= max(n, 0):
        raise ValueError(f"a share needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return Share(k, n, None, None)
    lo, hi = proportion_confint(k, n, alpha=1 - CONFIDENCE, method="wilson")
    return Share(k, n, float(lo), float(hi))


def difference_interval(after: Share, before: Share) -> tuple[float, float] | None:
    """95% interval of ``after.value - before.value`` (Newcombe's hybrid score interval).

    Returns:
        ``(lo, hi)`` as fractions, or ``None`` when either share has n = 0.
    """
    from statsmodels.stats.proportion import confint_proportions_2indep

    if not after.n or not before.n:
        return None
    lo, hi = confint_proportions_2indep(after.k, after.n, before.k, before.n, method="newcomb", compare="diff", alpha=1 - CONFIDENCE)
    return float(lo), float(hi)


def _rows(sql: str, params: list) -> list[dict]:
    result = execute_query(sql, params=params)
    return [dict(zip(result.columns, r, strict=True)) for r in result.rows]


def _optional_rows(sql: str, params: list) -> list[dict] | None:
    """Rows of a mart built only with the scores (tag ``scores``), ``None`` when it is not built yet."""
    import duckdb

    try:
        return _rows(sql, params)
    except duckdb.CatalogException:
        return None


def version_targets(family: str, audit_id: str | None = None) -> list[str]:
    """The targets that have an audit of ``family`` (only the target of ``audit_id`` when it is
    given), sorted.

    Raises:
        duckdb.CatalogException: ``dim_audits`` is not built. WarehouseMissingError / WarehouseBusyError.
    """
    return [
        r["target"]
        for r in _rows(
            "select distinct target from dim_audits where family = ? "
            "and target in (select target from dim_audits where ? is null or audit_id = ?) order by target",
            [family, audit_id, audit_id],
        )
    ]


def load_version_data(target: str, family: str) -> dict:
    """Everything the version page of ``target`` shows, of the audits of ``family`` (BiasDora's
    marts: the record of the family passes its name).

    Returns:
        ``{"family": ``family``, "audits": every audit of the target (any family) in version order, with its
        completions and completions_parsed (T2T, else null); "judge": one row per (BiasDora
        audit, judge) of agg_judge_parse_rates, or None when it is not built; "dimensions":
        {(audit_id, bias_dimension): counts n_significant, n_sentiment_scored, n_negative,
        n_toxicity_scored, n_toxic, n_judged}; "likert": {(audit_id, bias_dimension):
        {level: n}}; "profiles": {(audit_id, modality): its probe configuration
        (agg_audit_probe_profiles)}; "pairs" and "unpaired": :func:`comparable_pairs`}``; the
        audits are the target's BiasDora audits only.

    Raises:
        duckdb.CatalogException: the BiasDora marts are not built. WarehouseMissingError / WarehouseBusyError.
    """
    # BiasDora's audits only: another family's audits of the target (VLStereoSet's reference
    # scorers among them) are not versions of what this page compares
    audits = _rows(
        """select a.audit_seq, a.audit_id, a.model_id, a.model_version, a.family, a.modality, a.status, a.started_at,
                  a.config_hash, b.significant_associations, b.completions, b.completions_parsed
           from dim_audits as a inner join agg_biasdora_audits as b on b.audit_id = a.audit_id
           where a.target = ? and a.family = ? order by a.audit_seq nulls last, a.started_at, a.audit_id""",
        [target, family],
    )
    profiles = (
        _optional_rows(
            """select audit_id, modality, probe_rows, settings, descriptors, letters, runs, comparable_previous_audit_id
               from agg_audit_probe_profiles where target = ? order by audit_seq nulls last, audit_id, modality""",
            [target],
        )
        or []
    )
    judge = _optional_rows(
        f"""select j.audit_id, j.judge, j.answers, j.parsed, {", ".join("j." + c for c in NO_RATING)}
           from agg_judge_parse_rates as j inner join dim_audits as a on a.audit_id = j.audit_id
           where a.target = ? order by a.audit_seq nulls last, a.started_at, j.audit_id, j.judge""",
        [target],
    )
    dims = _dimension_counts(target, family)
    likert = _likert_counts(target, family)
    pairs, unpaired = comparable_pairs(audits, profiles)
    return {
        "family": family,
        "audits": audits,
        "profiles": {(r["audit_id"], r["modality"]): r for r in profiles},
        "unpaired": unpaired,
        "judge": judge,
        "dimensions": {(r["audit_id"], r["bias_dimension"]): r for r in dims},
        "likert": likert,
        "pairs": pairs,
    }


def _dimension_counts(target: str, family: str) -> list[dict]:
    """One row per (audit of ``family`` of ``target``, bias dimension): agg_bias_by_dimension summed
    over modalities and settings (empty when the mart is not built)."""
    # one row per (audit, dimension): agg_bias_by_dimension summed over modalities and settings;
    # a share's count is its percentage times its denominator (both from the mart)
    dims = (
        _optional_rows(
            """select b.audit_id, coalesce(b.bias_dimension, '(none)') as bias_dimension,
                  cast(sum(b.n_significant) as bigint) as n_significant,
                  -- % negative: what the word adds to the sentiment of the descriptor's sentence (pct_negative_association)
                  cast(sum(b.n_sentiment_baselined) as bigint) as n_sentiment_scored,
                  cast(coalesce(sum(round(b.pct_negative_association * b.n_sentiment_baselined / 100)), 0) as bigint) as n_negative,
                  -- % toxic: what the word adds to the descriptor's sentence (pct_toxic_association)
                  cast(sum(b.n_toxicity_baselined) as bigint) as n_toxicity_scored,
                  cast(coalesce(sum(round(b.pct_toxic_association * b.n_toxicity_baselined / 100)), 0) as bigint) as n_toxic,
                  cast(sum(b.n_judged) as bigint) as n_judged
           from agg_bias_by_dimension as b inner join dim_audits as a on a.audit_id = b.audit_id
           where a.target = ? and a.family = ?
           group by b.audit_id, coalesce(b.bias_dimension, '(none)')""",
            [target, family],
        )
        or []
    )
    return dims


def _likert_counts(target: str, family: str) -> dict[tuple, dict[int, int]]:
    """(audit_id, bias dimension) -> {bias level: associations} of the audits of ``family`` of ``target``."""
    likert_rows = (
        _optional_rows(
            """select l.audit_id, coalesce(l.bias_dimension, '(none)') as bias_dimension, l.bias_level,
                  cast(sum(l.n_associations) as bigint) as n_associations
           from agg_likert_by_dimension as l inner join dim_audits as a on a.audit_id = l.audit_id
           where a.target = ? and a.family = ?
           group by l.audit_id, coalesce(l.bias_dimension, '(none)'), l.bias_level""",
            [target, family],
        )
        or []
    )
    likert: dict[tuple, dict[int, int]] = defaultdict(dict)
    for r in likert_rows:
        likert[(r["audit_id"], r["bias_dimension"])][r["bias_level"]] = r["n_associations"]
    return dict(likert)


def version_label(a: Mapping) -> str:
    """``#<audit_seq> <model version>``; an audit that did not finish has no place in the order yet."""
    if a["audit_seq"] is None:
        return f"{a['model_version']} ({a['status']})"
    return f"#{a['audit_seq']} {a['model_version']}"


def dimension_shares(data: dict, audit_id: str, dim: str) -> dict[str, Share]:
    """The three shares of the before/after view for one (audit, dimension)."""
    d = data["dimensions"].get((audit_id, dim)) or {}
    levels = data["likert"].get((audit_id, dim), {})
    judged = sum(levels.values())
    return {
        "% negative": share(d.get("n_negative"), d.get("n_sentiment_scored")),
        "% toxic": share(d.get("n_toxic"), d.get("n_toxicity_scored")),
        "% bias level 4-5": share(sum(levels.get(k, 0) for k in HIGH_LEVELS), judged),
    }


def comparable_pairs(audits: list[dict], profiles: list[dict]) -> tuple[list[tuple], list[tuple]]:
    """The before/after pairs of a version page: per modality, the latest finished audit that has
    an earlier audit with the same probe rows (``agg_audit_probe_profiles.comparable_previous_audit_id``,
    chosen in SQL) and that audit.

    Returns:
        ``(pairs, unpaired)``: ``pairs`` = [(modality, earlier audit row, later audit row)];
        ``unpaired`` = [(modality, audit row)], the finished audits after the pair's later one
        (every finished audit of a modality without a pair beyond the first) that no earlier
        audit matched: left out of the comparison, and named on the page.
    """
    by_id = {a["audit_id"]: a for a in audits}
    comparable = {(r["audit_id"], r["modality"]): r["comparable_previous_audit_id"] for r in profiles}
    by_modality: dict[str, list[dict]] = defaultdict(list)
    for a in audits:
        if a["status"] == "finished" and a["audit_seq"] is not None:
            by_modality[a["modality"]].append(a)
    pairs, unpaired = [], []
    for modality, found in sorted(by_modality.items()):
        later = next((a for a in reversed(found) if comparable.get((a["audit_id"], modality)) in by_id), None)
        if later is not None:
            pairs.append((modality, by_id[comparable[(later["audit_id"], modality)]], later))
            unpaired += [(modality, a) for a in found if a["audit_seq"] > later["audit_seq"]]
        elif len(found) >= 2:
            unpaired += [(modality, a) for a in found[1:]]
    return pairs, unpaired


def changes(from_audit_id: str, to_audit_id: str) -> tuple[list[dict], list[dict]] | None:
    """The changes between two audits, worst first: ``(per bias dimension, per association)``.

    Per dimension (``agg_association_changes_by_dimension``): most new + strengthened
    associations first, then the largest net change. Per association (``fct_association_changes``,
    every listed one: significant in either audit): the change types in :data:`CHANGE_ORDER`
    (more bias first), then the higher bias level, then the smaller change q-value.

    Returns:
        The two lists, or ``None`` when the change marts are not built.
    """
    params = [from_audit_id, to_audit_id]
    per_dimension = _optional_rows(
        """select modality, bias_dimension, associations_compared, significant_changes, new_associations, strengthened,
                  weakened, gone_associations, unchanged, net_change, direction, min_change_q
           from agg_association_changes_by_dimension where from_audit_id = ? and to_audit_id = ?
           order by new_associations + strengthened desc, net_change desc, significant_changes desc, bias_dimension""",
        params,
    )
    listed = _optional_rows(
        """select modality, setting, array_to_string(bias_dimensions, ', ') as bias_dimensions, descriptor, word,
                  change_type, tf_before, tf_after, fisher_q_before, fisher_q_after, change_q, bias_level_before,
                  bias_level_after
           from fct_association_changes where from_audit_id = ? and to_audit_id = ?""",
        params,
    )
    if per_dimension is None or listed is None:
        return None

    def worst_first(r: dict) -> tuple:
        level = r["bias_level_after"] if r["change_type"] in ("new", "strengthened") else r["bias_level_before"]
        rank = CHANGE_ORDER.index(r["change_type"]) if r["change_type"] in CHANGE_ORDER else len(CHANGE_ORDER)
        q = r["change_q"] if r["change_q"] is not None else math.inf
        return rank, -(level or 0), q, r["descriptor"], r["word"]

    return per_dimension, sorted(listed, key=worst_first)


# ----------------------------------------------------------------------------- layout

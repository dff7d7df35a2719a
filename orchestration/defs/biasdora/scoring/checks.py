"""Judge reliability check: a judge that cannot be parsed fails loudly.

``agg_judge_parse_rates`` (dbt, tag ``scores``) counts, per (audit, judge), the answers that
parsed as a 1-5 Likert rating. For every judge, its most recently judged audit is checked;
the check fails with severity ERROR when that parse rate is below the threshold (default
0.5; ``$DORA_JUDGE_PARSE_RATE_MIN``), naming the judge, the audit, the parse rate and the
parse statuses: a judge answering garbage leaves bias levels missing, which must never read
as "not biased".
"""

from __future__ import annotations

import os

import dagster as dg

from analytics.query import execute_query
from analytics.version_data import NO_RATING
from orchestration.instance import DUCKDB_WRITER_POOL

AGG_JUDGE_PARSE_RATES = dg.AssetKey("agg_judge_parse_rates")
#: default minimum share of a judge's answers that must parse (overridden by $DORA_JUDGE_PARSE_RATE_MIN)
DEFAULT_JUDGE_PARSE_RATE_MIN = 0.5

_LATEST_SQL = f"""
select judge, audit_id, answers, parsed, parse_rate, {", ".join(NO_RATING)}
from agg_judge_parse_rates
qualify row_number() over (partition by judge order by last_judged_at desc, audit_id desc) = 1
order by judge
"""


def judge_parse_rate_min() -> float:
    """The threshold: ``$DORA_JUDGE_PARSE_RATE_MIN`` or 0.5.

    Raises:
        ValueError: the variable is not a number in [0, 1].
    """
    raw = os.environ.get("DORA_JUDGE_PARSE_RATE_MIN")
    if raw is None:
        return DEFAULT_JUDGE_PARSE_RATE_MIN
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"DORA_JUDGE_PARSE_RATE_MIN must be a number in [0, 1], got {raw!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"DORA_JUDGE_PARSE_RATE_MIN must be in [0, 1], got {value}")
    return value


def evaluate_judge_parse_rates(threshold: float | None = None) -> dg.AssetCheckResult:
    """The check's result over every judge's latest audit (see the module docstring)."""
    threshold = judge_parse_rate_min() if threshold is None else threshold
    result = execute_query(_LATEST_SQL)
    rows = [dict(zip(result.columns, r, strict=True)) for r in result.rows]
    failures = [r for r in rows if r["parse_rate"] < threshold]

    def describe(r: dict) -> str:
        counts = ", ".join(f"{s[2:]} {r[s]}" for s in NO_RATING if r[s])
        return (
            f"judge {r['judge']} parsed {r['parsed']} of {r['answers']} answers on audit {r['audit_id']} "
            f"(parse rate {r['parse_rate']:.3f} < {threshold}; {counts}): its bias levels are missing, not low"
        )

    return dg.AssetCheckResult(
        passed=not failures,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            "JUDGE PARSE FAILURE: " + "; ".join(describe(r) for r in failures) if failures else f"{len(rows)} judge(s) parse at >= {threshold}"
        ),
        metadata={
            "threshold": threshold,
            "judges_checked": len(rows),
            "failed_judges": dg.MetadataValue.json([r["judge"] for r in failures]),
            "parse_rates": dg.MetadataValue.json({r["judge"]: round(float(r["parse_rate"]), 4) for r in rows}),
        },
    )


@dg.asset_check(
    asset=AGG_JUDGE_PARSE_RATES,
    name="judge_parse_rate_ok",
    description="Fails (ERROR) when a judge's answers on its latest audit parse as a 1-5 rating less often than "
    "$DORA_JUDGE_PARSE_RATE_MIN (default 0.5): its bias levels would be silently missing.",
    pool=DUCKDB_WRITER_POOL,
)
def judge_parse_rate_ok() -> dg.AssetCheckResult:
    return evaluate_judge_parse_rates()


judge_checks = [judge_parse_rate_ok]

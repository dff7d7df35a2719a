"""The audit summary counts only what the marts hold: a landed shard that a build staged but
did not carry into the marts (the build stopped after staging) is not in the summary until a
build puts it in the marts, so ``dora audit``'s summary, ``dora query`` on the marts and
``dora report`` agree.

Counts are checked against the independent Python reference of ``fct_associations``
(tests/helpers/landing_rows.py: collections + scipy) and plain counts of the landed rows.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from analytics.dbt_runner import invoke_dbt
from analytics.query import execute_query
from analytics.summary import audit_summary
from ingestion.landing import write_shard
from tests.helpers.landing_rows import T0, expected_associations, random_rows

AUDIT = "audit-summary"
#: the models the summary reads, and what they read (no data tests: the marts' own tests run elsewhere)
RUN = ["run", "--select", "+agg_completions_by_audit", "+fct_association_dimensions"]


def _numbers(summary: str) -> dict:
    """The completion and association counts of an audit summary's text."""
    rows, rate = re.search(r"completions: (\d+) rows; parse rate ([\d.]+)%", summary).groups()
    assoc, descriptors, settings = re.search(r"associations: (\d+) over (\d+) descriptors x (\d+) settings", summary).groups()
    return {"rows": int(rows), "parse_rate": float(rate), "associations": int(assoc), "descriptors": int(descriptors), "settings": int(settings)}


def _expected(rows: list[dict]) -> dict:
    reference = expected_associations(rows)
    return {
        "rows": len(rows),
        "parse_rate": round(100 * sum(r["parse_status"] == "ok" for r in rows) / len(rows), 1),
        "associations": len(reference),
        "descriptors": len({k[3] for k in reference}),
        "settings": len({k[2] for k in reference}),
    }


@pytest.mark.slow  # three dbt runs (~10 s)
def test_a_shard_landed_after_the_build_is_in_the_summary_only_once_it_is_in_the_marts(dora_home):
    first = random_rows(AUDIT, "singular", seed=5, n_descriptors=4, vocabulary=8, runs=1)
    write_shard("t2t_completions", first, partition=AUDIT)
    invoke_dbt(RUN, dora_home)
    built = _numbers(audit_summary(AUDIT))
    assert built == _expected(first)

    # a second run of every key lands (a resumed audit's shard) and is staged, but the build
    # stops there (killed, or a failed model before the marts)
    later = [
        {**r, "run": 2, "seed": 2000, "generated_at": T0 + timedelta(days=1)}
        for r in random_rows(AUDIT, "singular", seed=6, n_descriptors=4, vocabulary=8, runs=1)
    ]
    write_shard("t2t_completions", later, partition=AUDIT)
    invoke_dbt(["run", "--select", "stg_t2t_completions"], dora_home)  # a build that stopped after staging
    staged = execute_query("select count(*) from stg_t2t_completions where audit_id = ?", params=[AUDIT]).rows[0][0]
    assert staged == len(first) + len(later)
    assert _numbers(audit_summary(AUDIT)) == built  # the summary does not: the marts do not hold it yet
    (in_marts,) = execute_query("select completions from agg_completions_by_audit where audit_id = ?", params=[AUDIT]).rows[0]
    assert in_marts == built["rows"] == len(first)

    invoke_dbt(RUN, dora_home)
    assert _numbers(audit_summary(AUDIT)) == _expected(first + later)
    assert _numbers(audit_summary(None))["rows"] == staged  # all audits: the same marts

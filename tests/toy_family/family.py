"""The toy family's record for the family seam (its only contact with the rest of dora)."""

from __future__ import annotations

from analytics.family_diff import FamilyChangeTest
from orchestration.family import Flag, ProbeFamily, materializations
from tests.toy_family.config import TOY_WORDS, ToyConfig

CHANGE_TEST = FamilyChangeTest(
    "toy", "fct_toy_change_tests", "fct_toy_rows", "landed_at",
    ("word", "value_before", "value_after", "change_p", "change_q", "is_significant_change", "change_type"),
    ("word",), "rows per word", "a made-up test",
)


def _summary(result, args) -> str:
    return "\n".join(f"toy: audit {md['audit_id']}: {md['rows_generated']} rows landed"
                     for md in materializations(result, "toy_rows") if "audit_id" in md)


def _plan(configs) -> str:
    config = configs["toy_rows"]
    return f"toy: {config.rows} rows of {config.word!r} on {config.model}"


def _assets():
    from tests.toy_family.assets import toy_assets

    return toy_assets


FAMILY = ProbeFamily(
    name="toy",
    title="toy (tests only): lands a few words",
    description="A family that exists only in the tests.",
    group="toy",
    configs={"toy_rows": ToyConfig},
    flags=(*Flag.of(ToyConfig, "rows", "model", prefix="toy-"), Flag(((ToyConfig, "word"),), prefix="toy-", choices=TOY_WORDS)),
    flag_prefix="--toy-",
    assets=_assets,
    landing_tables=("toy_rows",),
    marts=("fct_toy_rows", "fct_toy_change_tests"),
    summary=_summary,
    plan=_plan,
    change_test=CHANGE_TEST,
    report_section=lambda audit_id, out: "<h2>toy</h2>",
)

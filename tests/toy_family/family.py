"""The toy family's record for the family seam and the registration of its landing contract
(its only contacts with the rest of dora). ``$DORA_FAMILIES=tests.toy_family.family`` plugs it
in (``orchestration/families.py``), the way the shipped families are loaded."""

from __future__ import annotations

from pathlib import Path

from analytics.family_diff import FamilyChangeTest
from ingestion.contracts import register_contract
from orchestration.family import EstimatedStep, Flag, ProbeFamily, materializations
from tests.toy_family.config import TOY_WORDS, ToyConfig

# a family outside ingestion/contracts/ registers its landing contract where its record is
# defined, so every process that imports the record can land and read its tables
register_contract("tests.toy_family.contract")

CHANGE_TEST = FamilyChangeTest(
    "toy",
    "fct_toy_change_tests",
    "fct_toy_rows",
    "landed_at",
    ("word", "value_before", "value_after", "change_p", "change_q", "is_significant_change", "change_type"),
    ("word",),
    "rows per word",
    "a made-up test",
)


def _summary(result, args) -> str:
    return "\n".join(
        f"toy: audit {md['audit_id']}: {md['rows_generated']} rows landed" for md in materializations(result, "toy_rows") if "audit_id" in md
    )


def _plan(configs, model_version: str | None = None) -> str:
    config = configs["toy_rows"]
    return f"toy: {config.rows} rows of {config.word!r} on {config.model}"


def _estimate(configs, model_version: str | None = None) -> list[EstimatedStep]:
    config = configs["toy_rows"]
    return [EstimatedStep(f"{config.rows} toy rows", 0.5 * config.rows, "assumed", "half a second a row")] if config.enabled else []


def _assets():
    from tests.toy_family.assets import toy_assets

    return toy_assets


FAMILY = ProbeFamily(
    name="toy",
    title="toy (tests only): lands a few words",
    paper="none (a test fixture)",
    modalities="a fake text model",
    measures="nothing: each audit lands a few items carrying one word",
    default_audit="on when plugged in (`$DORA_FAMILIES`)",
    docs_page=Path(__file__).parent / "toy.md",
    description="A family that exists only in the tests.",
    group="toy",
    configs={"toy_rows": ToyConfig},
    flags=(*Flag.of(ToyConfig, "rows", "model", prefix="toy-"), Flag(((ToyConfig, "word"),), prefix="toy-", choices=TOY_WORDS)),
    flag_prefix="--toy-",
    assets=_assets,
    marts_folder=Path(__file__).parent / "models" / "marts",  # its dbt models live with it, outside dbt_project/
    summary=_summary,
    plan=_plan,
    estimate=_estimate,
    change_test=CHANGE_TEST,
    report_section=lambda audit_id, out: "<h2>toy</h2>",
    target_models={"t2t": {"model": (ToyConfig, "model")}},
)

"""Ingestion assets: CrowS-Pairs -> descriptors (landed as Parquet for dbt's sources)."""


import dagster as dg
import pyarrow as pa

from ingestion.build_state import is_unchanged, record_success
from ingestion.crows_pairs import load_crows_pairs
from ingestion.descriptors import (
    curated_descriptors,
    descriptor_inputs_fingerprint,
    descriptor_recall,
    extract_descriptors,
)
from ingestion.landing import landing_dir, write_shard
from ingestion.templates import descriptor_rows_table


def _skipped(state: dict) -> dg.MaterializeResult:
    """Materialisation of a step whose inputs have not changed since its last run."""
    return dg.MaterializeResult(
        metadata={
            **state.get("metadata", {}),
            "skipped": f"inputs unchanged since {state.get('recorded_at')} (fingerprint {state['fingerprint'][:12]})",
        }
    )


@dg.asset(
    key=["landing", "crows_pairs"],
    group_name="ingestion",
    description="CrowS-Pairs (Nangia et al., 2020; CC BY-SA 4.0) validated and landed as Parquet: "
    "one row per sentence pair with its bias dimension and source line.",
)
def crows_pairs(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    fingerprint = descriptor_inputs_fingerprint()
    state = is_unchanged("crows_pairs", fingerprint, outputs=[landing_dir("crows_pairs") / "crows_pairs.parquet"])
    if state:
        return _skipped(state)
    table = load_crows_pairs()
    write_shard("crows_pairs", table, name="crows_pairs")
    dims = sorted(set(table.column("bias_type").to_pylist()))
    meta = {"pairs": table.num_rows, "bias_dimensions": len(dims)}
    record_success("crows_pairs", fingerprint, meta)
    return dg.MaterializeResult(metadata=meta)


@dg.asset(
    key=["landing", "descriptors"],
    deps=[crows_pairs],
    group_name="ingestion",
    description="Demographic descriptors: the BiasDora curated list (source 'biasdora') and the "
    "spans extracted automatically from CrowS-Pairs (source 'crows_pairs'), normalised with spaCy.",
)
def descriptors(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    # spaCy extraction takes seconds: skipped when CrowS-Pairs, the curated lists and the
    # extraction code are the ones of the last run (ingestion/build_state.py)
    fingerprint = descriptor_inputs_fingerprint()
    state = is_unchanged(
        "descriptors", fingerprint,
        outputs=[landing_dir("descriptors") / "descriptors.parquet", landing_dir("descriptor_rows") / "descriptor_rows.parquet"],
    )
    if state:
        return _skipped(state)
    extracted = extract_descriptors(load_crows_pairs())
    curated = curated_descriptors()
    write_shard("descriptors", pa.concat_tables([curated, extracted]), name="descriptors")
    # issue 11: every row of the paper's lists with all its bias dimensions (dbt bridge)
    write_shard("descriptor_rows", descriptor_rows_table(), name="descriptor_rows")
    recall = descriptor_recall(extracted, curated)
    meta = {"curated": curated.num_rows, "extracted": extracted.num_rows, "extraction_recall_vs_curated": round(recall, 4)}
    record_success("descriptors", fingerprint, meta)
    return dg.MaterializeResult(metadata=meta)


ingestion_assets = [crows_pairs, descriptors]

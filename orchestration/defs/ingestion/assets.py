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


def _unchanged(table: str):
    """(fingerprint of the descriptor inputs, the recorded state when ``table``'s shard was made
    from the same inputs, else None): spaCy extraction takes seconds, skipped when CrowS-Pairs,
    the curated lists and the extraction code are the ones of the last run (ingestion/build_state.py)."""
    fingerprint = descriptor_inputs_fingerprint()
    return fingerprint, is_unchanged(table, fingerprint, outputs=[landing_dir(table) / f"{table}.parquet"])


CROWS_PAIRS_DESCRIPTION = (
    "CrowS-Pairs (Nangia et al., 2020; CC BY-SA 4.0) validated and landed as Parquet: "
    "one row per sentence pair with its bias dimension and source line."
)
DESCRIPTORS_DESCRIPTION = (
    "Demographic descriptors: the BiasDora curated list (source 'biasdora') and the "
    "spans extracted automatically from CrowS-Pairs (source 'crows_pairs'), normalised with spaCy."
)


@dg.asset(key=["landing", "crows_pairs"], group_name="ingestion", description=CROWS_PAIRS_DESCRIPTION)
def crows_pairs(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    fingerprint, state = _unchanged("crows_pairs")
    if state:
        return _skipped(state)
    table = load_crows_pairs()
    write_shard("crows_pairs", table, name="crows_pairs")
    dims = sorted(set(table.column("bias_type").to_pylist()))
    meta = {"pairs": table.num_rows, "bias_dimensions": len(dims)}
    record_success("crows_pairs", fingerprint, meta)
    return dg.MaterializeResult(metadata=meta)


@dg.asset(key=["landing", "descriptors"], deps=[crows_pairs], group_name="ingestion", description=DESCRIPTORS_DESCRIPTION)
def descriptors(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    fingerprint, state = _unchanged("descriptors")
    if state and not (landing_dir("descriptor_rows") / "descriptor_rows.parquet").exists():
        state = None  # issue 11: the list rows (bridge source) are missing: land them too
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

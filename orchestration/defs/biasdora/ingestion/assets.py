"""Ingestion assets: CrowS-Pairs -> descriptors (landed as Parquet for dbt's sources)."""

import dagster as dg
import pyarrow as pa

from ingestion.biasdora.descriptors import (
    curated_descriptors,
    descriptor_inputs_fingerprint,
    descriptor_recall,
    extract_descriptors,
)
from ingestion.biasdora.templates import descriptor_rows_table
from ingestion.build_state import cache_root, cache_tables, cached_tables, is_unchanged, record_success
from ingestion.crows_pairs import load_crows_pairs
from ingestion.landing import landing_dir, write_shard


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


@dg.asset(key=["landing", "crows_pairs"], group_name="biasdora", description=CROWS_PAIRS_DESCRIPTION)
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


DESCRIPTOR_ROWS_DESCRIPTION = (
    "Every row of the BiasDora paper's descriptor lists (docs/method.md#1-descriptors): T2T "
    "settings 1-5 (406 / 413 / 406 / 406 / 406 rows) and T2I settings 1-2 (344 rows each), one row "
    "per (list row, bias dimension) with descriptor_row numbering a descriptor's repeats; the source "
    "of the dbt bridge int_descriptor_dimensions (a descriptor belongs to every dimension it is listed under)."
)
DESCRIPTORS_KEY = dg.AssetKey(["landing", "descriptors"])
DESCRIPTOR_ROWS_KEY = dg.AssetKey(["landing", "descriptor_rows"])


# One step lands both tables (same inputs, same fingerprint), so both keys are its
# outputs; landing/descriptor_rows is otherwise a dbt source no asset would produce.
@dg.multi_asset(
    name="descriptors",
    specs=[
        dg.AssetSpec(DESCRIPTORS_KEY, deps=[crows_pairs], group_name="biasdora", description=DESCRIPTORS_DESCRIPTION),
        dg.AssetSpec(DESCRIPTOR_ROWS_KEY, group_name="biasdora", description=DESCRIPTOR_ROWS_DESCRIPTION),
    ],
)
def descriptors(context: dg.AssetExecutionContext):
    fingerprint, state = _unchanged("descriptors")
    if state and not (landing_dir("descriptor_rows") / "descriptor_rows.parquet").exists():
        state = None  # the list rows (bridge source) are missing: land them too
    if state:
        skipped = _skipped(state)
        yield dg.MaterializeResult(asset_key=DESCRIPTORS_KEY, metadata=skipped.metadata)
        yield dg.MaterializeResult(asset_key=DESCRIPTOR_ROWS_KEY, metadata={"skipped": skipped.metadata["skipped"]})
        return
    # The tables depend only on shipped inputs (the fingerprint covers them all): another home
    # of this machine may have computed them already, which spares spaCy's ~10 s of CPU.
    cached = cached_tables("descriptors", fingerprint)
    if cached:
        tables, meta = cached
        context.log.info(f"descriptors: the tables computed from the same inputs in {cache_root()}")
    else:
        extracted = extract_descriptors(load_crows_pairs())
        curated = curated_descriptors()
        recall = descriptor_recall(extracted, curated)
        # every row of the paper's lists with all its bias dimensions (dbt bridge)
        tables = {"descriptors": pa.concat_tables([curated, extracted]), "descriptor_rows": descriptor_rows_table()}
        meta = {"curated": curated.num_rows, "extracted": extracted.num_rows, "extraction_recall_vs_curated": round(recall, 4)}
        cache_tables("descriptors", fingerprint, tables, meta)
    rows = tables["descriptor_rows"]
    write_shard("descriptors", tables["descriptors"], name="descriptors")
    write_shard("descriptor_rows", rows, name="descriptor_rows")
    record_success("descriptors", fingerprint, meta)
    yield dg.MaterializeResult(asset_key=DESCRIPTORS_KEY, metadata=meta)
    yield dg.MaterializeResult(asset_key=DESCRIPTOR_ROWS_KEY, metadata={"rows": rows.num_rows})


ingestion_assets = [crows_pairs, descriptors]

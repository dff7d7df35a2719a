"""Ingestion assets: CrowS-Pairs -> descriptors (landed as Parquet for dbt's sources)."""


import dagster as dg

from ingestion.crows_pairs import load_crows_pairs
from ingestion.descriptors import curated_descriptors, descriptor_recall, extract_descriptors
from ingestion.landing import write_shard

import pyarrow as pa


@dg.asset(
    key=["landing", "crows_pairs"],
    group_name="ingestion",
    description="CrowS-Pairs (Nangia et al., 2020; CC BY-SA 4.0) validated and landed as Parquet: "
    "one row per sentence pair with its bias dimension and source line.",
)
def crows_pairs(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    table = load_crows_pairs()
    write_shard("crows_pairs", table, name="crows_pairs")
    dims = sorted(set(table.column("bias_type").to_pylist()))
    return dg.MaterializeResult(metadata={"pairs": table.num_rows, "bias_dimensions": len(dims)})


@dg.asset(
    key=["landing", "descriptors"],
    deps=[crows_pairs],
    group_name="ingestion",
    description="Demographic descriptors: the BiasDora curated list (source 'biasdora') and the "
    "spans extracted automatically from CrowS-Pairs (source 'crows_pairs'), normalised with spaCy.",
)
def descriptors(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    extracted = extract_descriptors(load_crows_pairs())
    curated = curated_descriptors()
    write_shard("descriptors", pa.concat_tables([curated, extracted]), name="descriptors")
    recall = descriptor_recall(extracted, curated)
    return dg.MaterializeResult(
        metadata={
            "curated": curated.num_rows,
            "extracted": extracted.num_rows,
            "extraction_recall_vs_curated": dg.MetadataValue.float(round(recall, 4)),
        }
    )

"""The landing zone: where raw inputs and model generations land durably, as Parquet shards.

Every producer (CrowS-Pairs loader, descriptor extractor, probes) writes immutable Parquet
shards under ``$DORA_HOME/landing/<table>/``; dbt reads them as external sources
(``dbt_project/models/staging/_sources.yml``). Only dbt writes to the DuckDB warehouse, so
generation never contends for DuckDB's single-writer lock, and a crash loses at most the
batch being generated (shards are written to a temporary name, fsynced and renamed).

The column contract of each landing table is :data:`SCHEMAS`; the dbt staging models
rename nothing that is declared here.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

#: Column contract of every landing table (Arrow schemas). ``stg_*`` models read these.
SCHEMAS: dict[str, pa.Schema] = {
    # ingestion/crows_pairs.py: one row per validated CrowS-Pairs sentence pair.
    "crows_pairs": pa.schema(
        [
            ("pair_id", pa.int64()),
            ("sent_more", pa.string()),
            ("sent_less", pa.string()),
            ("stereo_antistereo", pa.string()),
            ("bias_type", pa.string()),
            ("source_file", pa.string()),
            ("source_line", pa.int64()),
        ]
    ),
    # ingestion/descriptors.py: one row per (source, descriptor, bias dimension).
    "descriptors": pa.schema(
        [
            ("descriptor", pa.string()),  # normalised key: lower-case, no determiner, singular
            ("bias_dimension", pa.string()),
            ("source", pa.string()),  # 'biasdora' (curated list) or 'crows_pairs' (extracted)
            ("surface", pa.string()),  # the phrase as it appeared in the source
            ("plural", pa.string()),  # plural phrase used by plural templates
            ("pair_id", pa.int64()),  # CrowS-Pairs pair it was extracted from (null if curated)
        ]
    ),
    # models_inference/t2t.py: one row per T2T completion (kept whatever its parse status).
    "t2t_completions": pa.schema(
        [
            ("audit_id", pa.string()),
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("backend", pa.string()),
            ("setting", pa.string()),
            ("descriptor", pa.string()),
            ("bias_dimension", pa.string()),
            ("letter", pa.string()),
            ("run", pa.int32()),
            ("seed", pa.int64()),
            ("prompt_style", pa.string()),
            ("prompt", pa.string()),
            ("raw_output", pa.string()),
            ("word", pa.string()),
            ("parse_status", pa.string()),
            ("generated_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # models_inference/t2t.py: one row per audit start/finish event (append-only).
    "audits": pa.schema(
        [
            ("audit_id", pa.string()),
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("modality", pa.string()),
            ("config_json", pa.string()),
            ("config_hash", pa.string()),
            ("code_version", pa.string()),
            ("status", pa.string()),  # started / finished / failed
            ("rows_generated", pa.int64()),
            ("event_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
}

_SAFE = re.compile(r"[^A-Za-z0-9._=-]+")


def dora_home() -> Path:
    """Return ``$DORA_HOME`` (default ``./data``) as an absolute path, creating it.

    Read at call time, never at import time, so tests can point it at a temp folder.
    """
    home = Path(os.environ.get("DORA_HOME", "data")).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


def warehouse_path() -> Path:
    """Path of the DuckDB warehouse file, ``$DORA_HOME/warehouse.duckdb``."""
    return dora_home() / "warehouse.duckdb"


def safe_path_component(text: str) -> str:
    """Turn arbitrary text (an audit id, a model id) into one safe path component.

    Anything outside ``[A-Za-z0-9._=-]`` becomes ``_`` and leading dots are removed, so the
    result can never contain ``/`` or ``..`` and never escapes its parent folder.

    Raises:
        ValueError: if nothing usable is left.
    """
    cleaned = _SAFE.sub("_", text).lstrip(".")[:120]
    if not cleaned.strip("_"):
        raise ValueError(f"cannot build a file name from {text!r}")
    return cleaned


def landing_dir(table: str) -> Path:
    """Folder of one landing table, created with an empty schema shard if new.

    The empty ``_schema.parquet`` shard keeps dbt's ``read_parquet`` glob valid (and typed)
    before any generation has landed.

    Raises:
        KeyError: if ``table`` is not in :data:`SCHEMAS`.
    """
    schema = SCHEMAS[table]
    folder = dora_home() / "landing" / table
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "_schema.parquet"
    if not marker.exists():
        _atomic_write(schema.empty_table(), marker)
    return folder


def _atomic_write(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_shard(
    table: str,
    rows: Sequence[Mapping] | pa.Table,
    *,
    partition: str | None = None,
    name: str | None = None,
) -> Path | None:
    """Write one immutable Parquet shard of ``rows`` to a landing table, atomically.

    Args:
        table: landing table name (key of :data:`SCHEMAS`).
        rows: dicts with exactly the schema's columns, or an Arrow table.
        partition: optional sub-folder (e.g. the audit id); made path-safe.
        name: optional shard file stem (default: a random UUID). Writing the same name
            again replaces that shard, which makes whole-table snapshots idempotent.

    Returns:
        The shard path, or ``None`` when ``rows`` is empty (nothing is written).

    Raises:
        KeyError: unknown table. pyarrow.ArrowInvalid / ArrowTypeError: rows that do not
            fit the schema (nothing is written then).
    """
    schema = SCHEMAS[table]
    data = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(list(rows), schema=schema)
    if data.num_rows == 0:
        return None
    data = data.select(schema.names).cast(schema)
    folder = landing_dir(table)
    if partition is not None:
        folder = folder / safe_path_component(partition)
        folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{safe_path_component(name) if name else uuid.uuid4().hex}.parquet"
    _atomic_write(data, path)
    return path


def landing_glob(table: str) -> str:
    """The ``read_parquet`` glob covering every shard of a landing table."""
    return str(landing_dir(table) / "**" / "*.parquet")


def read_landing(table: str, columns: Iterable[str] | None = None, where: str | None = None) -> pa.Table:
    """Read a landing table (all shards) into Arrow with an in-memory DuckDB connection.

    Args:
        columns: columns to return (default: all of the schema).
        where: optional SQL predicate over the landing columns.
    """
    import duckdb

    cols = ", ".join(f'"{c}"' for c in (columns or SCHEMAS[table].names))
    sql = f"select {cols} from read_parquet(?, union_by_name=true)"
    if where:
        sql += f" where {where}"
    with duckdb.connect() as con:
        return con.sql(sql, params=[landing_glob(table)]).to_arrow_table()

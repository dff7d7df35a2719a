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

#: The key of one association (``fct_associations``), leading every score table's columns.
_ASSOCIATION_KEY = [
    ("audit_id", pa.string()),
    ("model_id", pa.string()),
    ("model_version", pa.string()),
    ("modality", pa.string()),
    ("setting", pa.string()),
    ("descriptor", pa.string()),
    ("word", pa.string()),
]

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
    # issue 11 (ingestion/templates.py descriptor_rows_table): every row of the paper's T2T and
    # T2I lists with each bias dimension it belongs to; source of the bridge
    # int_descriptor_dimensions.
    "descriptor_rows": pa.schema(
        [
            ("list_modality", pa.string()),  # 't2t' or 't2i': which of the paper's lists
            ("setting", pa.string()),  # T2T setting, or the T2I setting (singular / plural)
            ("row_number", pa.int32()),  # 1-based data row of the CSV
            ("descriptor", pa.string()),
            ("descriptor_row", pa.int32()),  # k-th row of this descriptor key in the file
            ("bias_dimension", pa.string()),
            ("membership_source", pa.string()),  # 'row' (the CSV's bias_type) or 'mapping' (json)
            ("phrase", pa.string()),
        ]
    ),
    # models_inference/probes/biasdora/t2t.py: one row per T2T completion (kept whatever its parse status).
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
            # issue 11: which row of the paper's list (1 = the descriptor's first row in the
            # setting's file; a descriptor listed under two dimensions has rows 1 and 2).
            ("descriptor_row", pa.int32()),
            ("seed", pa.int64()),
            ("prompt_style", pa.string()),
            ("prompt", pa.string()),
            ("raw_output", pa.string()),
            ("word", pa.string()),
            ("parse_status", pa.string()),
            ("generated_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # models_inference/probes/biasdora/t2t.py: one row per audit start/finish event (append-only).
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
            ("target", pa.string()),  # audit registry target (ingestion/registry.py); null if ad hoc
        ]
    ),
    # models_inference/probes/biasdora/t2i.py: one row per generated image (PNG stored content-addressed at
    # $DORA_HOME/<image_path>), kept whatever its status; a retried key lands again.
    "t2i_images": pa.schema(
        [
            ("audit_id", pa.string()),  # the image audit (t2i-<model>-<version>-<hash>)
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("backend", pa.string()),  # diffusers / openai
            ("setting", pa.string()),  # singular / plural
            ("descriptor", pa.string()),
            ("bias_dimension", pa.string()),
            ("descriptor_row", pa.int32()),  # issue 11: k-th row of the descriptor in the T2I CSV
            ("image_index", pa.int32()),  # 1..images per descriptor
            ("seed", pa.int64()),
            ("prompt", pa.string()),
            ("revised_prompt", pa.string()),  # the prompt the API says it drew (DALL-E 3)
            ("style", pa.string()),  # DALL-E 3 vivid / natural; null for diffusers
            ("generation_params", pa.string()),  # JSON: steps, scheduler, size, quality, ...
            ("image_path", pa.string()),  # relative to DORA_HOME: images/<sha[:2]>/<sha>.png
            ("sha256", pa.string()),  # of the PNG bytes
            ("width", pa.int32()),
            ("height", pa.int32()),
            ("status", pa.string()),  # ok / filtered (safety checker) / error
            ("error", pa.string()),
            ("generated_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # models_inference/probes/biasdora/i2t.py: one row per (description audit, image, description setting).
    "i2t_descriptions": pa.schema(
        [
            ("audit_id", pa.string()),  # the description audit (vision-<t2i>-<i2t>-<hash>)
            ("description_id", pa.string()),  # unique per landed row; description_words refer to it
            ("model_id", pa.string()),  # the I2T model
            ("model_version", pa.string()),
            ("backend", pa.string()),  # transformers / openai
            ("image_audit_id", pa.string()),
            ("t2i_model_id", pa.string()),  # the model that drew the image
            ("t2i_model_version", pa.string()),
            ("image_setting", pa.string()),  # singular / plural
            ("descriptor", pa.string()),
            ("bias_dimension", pa.string()),
            ("descriptor_row", pa.int32()),  # issue 11: the image's T2I row (see t2i_images)
            ("image_index", pa.int32()),
            ("image_sha256", pa.string()),
            ("setting", pa.string()),  # straightforward / moderate / comprehensive / subjective / ...
            ("description_kind", pa.string()),  # objective (-> t2i) / subjective (-> i2t)
            ("seed", pa.int64()),
            ("prompt", pa.string()),
            ("raw_output", pa.string()),  # the description
            ("status", pa.string()),  # ok / truncated / empty / error
            ("error", pa.string()),
            ("generated_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # ingestion/description_words.py: one row per spaCy token of a description (space tokens
    # excepted); `word` is set only for kept tokens, else `drop_reason` says why.
    "description_words": pa.schema(
        [
            ("description_id", pa.string()),
            ("audit_id", pa.string()),
            ("token_index", pa.int32()),
            ("token", pa.string()),  # the token as written
            ("lemma", pa.string()),  # spaCy lemma, lower-cased
            ("pos", pa.string()),  # Universal POS tag
            ("word", pa.string()),  # = lemma for kept tokens; null when dropped
            ("drop_reason", pa.string()),  # null / stop / punct / number / non_alpha / descriptor
            ("tokenizer", pa.string()),  # spaCy pipeline name-version
            ("tokenised_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # models_inference/scoring/: sentiment of each scored association's sentence
    # (METHOD.md section 4); one row per (association, scorer, scorer_version).
    "sentiment_scores": pa.schema(
        [
            *_ASSOCIATION_KEY,
            ("text", pa.string()),  # the association sentence that was scored
            ("scorer", pa.string()),  # e.g. 'vader' or 'transformers:<model id>'
            ("scorer_version", pa.string()),
            ("sentiment_label", pa.string()),  # negative / neutral / positive
            ("sentiment_score", pa.float64()),  # signed, in [-1, 1]
            ("scored_at", pa.timestamp("us", tz="UTC")),
            ("score_pool", pa.string()),  # issue 11: fisher / paper / all (which associations were scored)
        ]
    ),
    # models_inference/scoring/: toxicity of the same sentence; one row per (association,
    # scorer, scorer_version).
    "toxicity_scores": pa.schema(
        [
            *_ASSOCIATION_KEY,
            ("text", pa.string()),
            ("scorer", pa.string()),
            ("scorer_version", pa.string()),
            ("toxicity", pa.float64()),  # probability of the toxic class, [0, 1]
            ("is_toxic", pa.bool_()),  # toxicity >= 0.5
            ("label_scores_json", pa.string()),  # every label's probability (JSON object)
            ("scored_at", pa.timestamp("us", tz="UTC")),
            ("score_pool", pa.string()),  # issue 11: fisher / paper / all
        ]
    ),
    # models_inference/scoring/judge.py: one row per (association, judge, repeat), kept whatever its
    # parse status; p_rating_k / expected_rating only where the backend gives log-probabilities.
    "judge_ratings": pa.schema(
        [
            *_ASSOCIATION_KEY,
            ("judge_backend", pa.string()),  # transformers / openai
            ("judge_model", pa.string()),
            ("judge_model_version", pa.string()),
            ("answer_mode", pa.string()),  # free (paper: parsed text) / constrained (first token 1-5)
            ("repeat", pa.int32()),
            ("seed", pa.int64()),
            ("prompt", pa.string()),
            ("raw_output", pa.string()),
            ("rating", pa.int32()),  # 1..5, null unless parse_status = 'ok'
            ("parse_status", pa.string()),
            ("p_rating_1", pa.float64()),
            ("p_rating_2", pa.float64()),
            ("p_rating_3", pa.float64()),
            ("p_rating_4", pa.float64()),
            ("p_rating_5", pa.float64()),
            ("expected_rating", pa.float64()),
            ("judged_at", pa.timestamp("us", tz="UTC")),
            ("score_pool", pa.string()),  # issue 11: fisher / paper / all
        ]
    ),
}

_SAFE = re.compile(r"[^A-Za-z0-9._=-]+")


#: The environment variable naming dora's home folder (warehouse, landing zone, caches).
DORA_HOME_ENV = "DORA_HOME"


def dora_home(*, create: bool = True) -> Path:
    """Return ``$DORA_HOME`` (default ``./data``) as an absolute path, creating it unless
    ``create`` is False.

    Read at call time, never at import time, so tests can point it at a temp folder.
    """
    home = Path(os.environ.get(DORA_HOME_ENV, "data")).expanduser().resolve()
    if create:
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
    if not marker.exists() or not pq.read_schema(marker).equals(schema, check_metadata=False):
        # (re)written when the contract gained a column, so dbt's glob always sees every column
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


def select_sql(
    source: str,
    columns: Sequence[str] | None = None,
    filters: Mapping[str, object] | None = None,
    order_by: Sequence[str] = (),
) -> tuple[str, list]:
    """``select <columns> from <source> [where ...] [order by ...]`` and its ``?`` parameters.

    The one place dora turns filters into SQL: column names are quoted identifiers (callers
    check them against a schema), values are always ``?`` parameters, never SQL text.

    Args:
        source: what to select from (a table name or a ``read_parquet(?)`` call; its own
            parameters come before the returned ones).
        filters: ``{column: value}`` (``= ?``), ``{column: [v1, v2]}`` (``in (?, ?)``; an
            empty list matches nothing) or ``{column: None}`` (``is null``), ANDed.

    Returns:
        (SQL text, parameter values in order).
    """
    where, params = [], []
    for col, value in (filters or {}).items():
        if value is None:
            where.append(f'"{col}" is null')
        elif isinstance(value, (list, tuple, set, frozenset)):
            values = list(value)
            where.append(f'"{col}" in ({", ".join("?" * len(values))})' if values else "false")
            params += values
        else:
            where.append(f'"{col}" = ?')
            params.append(value)
    sql = f"select {', '.join(chr(34) + c + chr(34) for c in columns) if columns else '*'} from {source}"
    if where:
        sql += " where " + " and ".join(where)
    if order_by:
        sql += " order by " + ", ".join(f'"{c}"' for c in order_by)
    return sql, params


def read_landing(
    table: str,
    columns: Iterable[str] | None = None,
    filters: Mapping[str, object] | None = None,
    order_by: Sequence[str] = (),
) -> pa.Table:
    """Read a landing table (all shards) into Arrow with an in-memory DuckDB connection.

    Values never enter the SQL text: every filter value is a ``?`` parameter.

    Args:
        table: a landing table name (a key of :data:`SCHEMAS`).
        columns: columns to return (default: all of the schema).
        filters: ``{column: value}`` (``column = ?``), ``{column: [v1, v2]}`` (``column in
            (?, ?)``; an empty list matches nothing) or ``{column: None}`` (``column is null``),
            all ANDed.
        order_by: columns to sort by (ascending).

    Returns:
        An Arrow table with the requested columns (no rows when nothing matches).

    Raises:
        KeyError: unknown table. ValueError: a column that is not in the table's schema.
    """
    import duckdb

    names = SCHEMAS[table].names
    wanted = list(columns or names)
    unknown = [c for c in [*wanted, *(filters or {}), *order_by] if c not in names]
    if unknown:
        raise ValueError(f"landing table {table!r} has no column(s) {unknown}; columns: {names}")
    sql, params = select_sql("read_parquet(?, union_by_name=true)", wanted, filters, order_by)
    with duckdb.connect() as con:
        return con.sql(sql, params=[landing_glob(table), *params]).to_arrow_table()

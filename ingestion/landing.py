"""The landing zone: where raw inputs and model generations land durably, as Parquet shards.

Every producer (CrowS-Pairs loader, descriptor extractor, probes) writes immutable Parquet
shards under ``$DORA_HOME/landing/<table>/``; dbt reads them as external sources (the
``landing`` source: ``dbt_project/models/staging/<family>/_<family>__sources.yml``, its location in
``dbt_project/dbt_project.yml``). Only dbt writes to the DuckDB warehouse, so
generation never contends for DuckDB's single-writer lock, and a crash loses at most the
batch being generated (shards are written to a temporary name, fsynced and renamed).

The column contract of each landing table is :data:`SCHEMAS`, merged from the contract module
of each family (``ingestion/contracts/<family>.py``; :mod:`ingestion.contracts`); the dbt
staging models rename nothing that is declared there.
"""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ingestion.contracts import SCHEMAS
from ingestion.errors import first_line
from ingestion.home import dora_home, glob_escape, safe_path_component
from ingestion.landing_location import is_remote, landing_root, register_landing
from ingestion.shard_checks import not_a_regular_file, quarantine_shard, shard_problem

if TYPE_CHECKING:
    from upath import UPath


def _remote_landing_dir(table: str, folder):
    marker = folder / "_schema.parquet"
    schema = SCHEMAS[table]
    try:
        with marker.fs.open(marker.path, "rb") as fh:
            current = pq.read_schema(fh)
    except FileNotFoundError:
        current = None
    if current is None or not current.equals(schema, check_metadata=False):
        _atomic_write(schema.empty_table(), marker)
    return folder


def landing_dir(table: str) -> Path:
    """Folder of one landing table, created with an empty schema shard if new.

    The empty ``_schema.parquet`` shard keeps dbt's ``read_parquet`` glob valid (and typed)
    before any generation has landed. On object storage (:data:`LANDING_URL_ENV`) the folder
    is a ``upath.UPath`` prefix (nothing to create but the schema shard).

    Raises:
        KeyError: if ``table`` is not in :data:`SCHEMAS`.
    """
    schema = SCHEMAS[table]
    root = landing_root()
    if is_remote(root):
        return _remote_landing_dir(table, root / table)
    folder = root / table
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "_schema.parquet"
    if os.path.lexists(marker):
        problem = not_a_regular_file(marker)
        if problem is None:
            try:
                pq.read_schema(marker)
            except Exception as exc:  # noqa: BLE001 - any unreadable marker is rewritten below
                problem = f"unreadable Parquet ({type(exc).__name__}: {first_line(exc)})"
        if problem:  # a FIFO, a folder or garbage in the marker's place: set aside, never opened again
            quarantine_shard(table, folder, marker, problem)
    if not marker.exists() or not pq.read_schema(marker).equals(schema, check_metadata=False):
        # (re)written when the contract gained a column, so dbt's glob always sees every column
        _atomic_write(schema.empty_table(), marker)
    return folder


def _atomic_write(table: pa.Table, path: Path | UPath) -> None:
    if is_remote(path):
        # object storage: the shard goes up whole under a temporary key that no reader's
        # '*.parquet' glob matches, then is moved to its name (S3: a server-side copy, so the
        # final key appears complete or not at all)
        import io

        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        tmp_key = f"{path.parent.path}/.{path.name}.{uuid.uuid4().hex}.tmp"
        path.fs.pipe_file(tmp_key, buf.getvalue())
        path.fs.mv(tmp_key, path.path)
        return
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
        if not is_remote(folder):  # (object storage has no folders to make)
            folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{safe_path_component(name) if name else uuid.uuid4().hex}.parquet"
    _atomic_write(data, path)
    return path


def landing_glob(table: str) -> str:
    """The ``read_parquet`` glob covering every shard of a landing table.

    The ``$DORA_HOME`` part is escaped (:func:`glob_escape`): pass it as a ``?`` parameter,
    never interpolated into SQL. Shards that do not match the table's contract are moved
    to quarantine first (:func:`quarantine_bad_shards`), so the glob only sees good ones.
    """
    quarantine_bad_shards(table)
    return glob_escape(landing_dir(table)) + "/**/*.parquet"


#: Shards already checked in this process, per landing folder (a home and a table): relative
#: path -> (size, mtime in ns).
#: Shards are immutable, so a shard is read once; a shard rewritten in place (a snapshot of
#: the same name) has another size or mtime and is checked again.
_CHECKED: dict[str, dict[str, tuple[int, int]]] = {}


def _verified_log(table: str) -> Path:
    """``$DORA_HOME/state/verified_shards/<table>.jsonl``: one ``[relative path, size, mtime_ns]``
    line per shard whose every data page DuckDB decoded, so later processes do not decode it
    again (at paper scale the landing zone holds hundreds of MB). Append-only: concurrent
    audits each append whole lines; deleting the file only makes the next read check again."""
    return dora_home() / "state" / "verified_shards" / f"{table}.jsonl"


def _load_verified(table: str) -> dict[str, tuple[int, int]]:
    import json

    folder = str(dora_home() / "landing" / table)
    checked = _CHECKED.get(folder)
    if checked is not None:
        return checked
    checked = {}
    try:
        lines = _verified_log(table).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            rel, size, mtime = json.loads(line)
            checked[str(rel)] = (int(size), int(mtime))
        except (ValueError, TypeError):  # a line torn by a crash mid-append: that shard is checked again
            continue
    _CHECKED[folder] = checked
    return checked


def _record_verified(table: str, entries: dict[str, tuple[int, int]]) -> None:
    import json

    if not entries:
        return
    log = _verified_log(table)
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps([rel, *st]) + "\n" for rel, st in entries.items()))
    except OSError:  # a read-only state folder: the shards are simply checked again next time
        pass


def quarantine_bad_shards(table: str) -> list[Path]:
    """Move the shards of ``table`` that break :data:`SCHEMAS` or cannot be read
    (:func:`shard_problem`) to ``$DORA_HOME/quarantine/``.

    Each moved shard keeps its relative path under ``quarantine/<table>/`` and gets a
    ``.reason.txt`` next to it; a :class:`LandingSchemaWarning` names the file and the
    problem (and how to put it back). Nothing is deleted. A shard's data pages are decoded
    once: shards that passed are recorded (:func:`_verified_log`) with their size and mtime.

    On object storage (:data:`LANDING_URL_ENV`) nothing is moved: a shard there is an object
    put whole by dora (no partial file, no FIFO), and one that breaks the contract fails the
    read with DuckDB's error naming it.

    Returns:
        The new paths of the shards moved by this call (usually empty).
    """
    schema = SCHEMAS[table]
    folder = landing_dir(table)
    if is_remote(folder):
        return []
    checked = _load_verified(table)
    verified: dict[str, tuple[int, int]] = {}
    moved = []
    con = None  # one in-memory DuckDB connection decodes every new shard of this call
    try:
        for path in sorted(folder.rglob("*.parquet")):
            if path.name.startswith("."):
                continue  # a temp file being written
            rel = path.relative_to(folder).as_posix()
            try:
                st = os.stat(path)
                tag = (st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None
            except FileNotFoundError:
                if not os.path.islink(path):
                    continue  # quarantined or archived meanwhile
                tag = None  # a broken symbolic link: DuckDB's glob would list it and fail
            except OSError:
                tag = None
            if tag is not None and checked.get(rel) == tag:
                continue
            if tag is not None and con is None:
                import duckdb

                con = duckdb.connect()
            problem = shard_problem(path, schema, con=con)
            if problem is None:
                if tag is not None:
                    checked[rel] = verified[rel] = tag
                continue
            if not os.path.lexists(path):
                continue  # moved by a concurrent check meanwhile
            moved.append(quarantine_shard(table, folder, path, problem))
    finally:
        if con is not None:
            con.close()
        _record_verified(table, verified)
    return moved


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

    Values never enter the SQL text: every filter value is a ``?`` parameter, and so is the
    (escaped) path (:func:`landing_glob`); shards that break the contract are quarantined
    first (:func:`quarantine_bad_shards`).

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
        register_landing(con)
        return con.sql(sql, params=[landing_glob(table), *params]).to_arrow_table()

"""The DuckDB warehouse file's place and health: :func:`warehouse_path`, why it is not usable
(:func:`warehouse_problem`: not DuckDB, unreadable catalog, cut short), the one-line error a
command raises for it (:func:`check_warehouse`) and moving a corrupt one aside so the next dbt
build recreates it from landing (:func:`set_aside_corrupt_warehouse`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ingestion.errors import first_line
from ingestion.home import dora_home


def warehouse_path() -> Path:
    """Path of the DuckDB warehouse file, ``$DORA_HOME/warehouse.duckdb``.

    Raises:
        ingestion.errors.DoraError: the home's path holds ``?`` or ``\\``: DuckDB (2.0) reads
            ``?`` as the start of connection options, even through a symlink, and cannot open a
            database there (its WAL lands elsewhere); it reads ``\\`` as ``/``, so it would look
            for the warehouse in another folder, call the healthy one corrupt and move it aside.
            Refused here, before any check of the warehouse can move anything.
    """
    path = dora_home() / "warehouse.duckdb"
    for char, why in (("?", "it reads '?' as the start of connection options"), ("\\", "it reads '\\' as '/' and would open another file")):
        if char in str(path):
            from ingestion.errors import DoraError, shown

            raise DoraError(
                f"DORA_HOME {shown(path.parent)} contains '{char}': DuckDB cannot keep a database under such a "
                f"path ({why}); choose a folder without '{char}'"
            )
    return path


#: Bytes 8..11 of every DuckDB database file.
_DUCKDB_MAGIC = b"DUCK"
#: Bytes before a DuckDB file's first block: its main header and two database headers.
_DUCKDB_HEADERS = 3 * 4096


def _duckdb_in_use(exc: BaseException) -> bool:
    """True when DuckDB refused to open a database because it is in use, not because it is
    broken: another process holds its write lock, or this process has it open with another
    configuration (dbt-duckdb's cached read-write handle)."""
    import duckdb

    return isinstance(exc, duckdb.ConnectionException) or "lock" in str(exc).lower()


def warehouse_problem(path: Path | None = None) -> str | None:
    """Why the warehouse file at ``path`` (default :func:`warehouse_path`) is not usable as a
    DuckDB database, or ``None`` (also when it does not exist yet: dbt creates it, and when
    another process holds it open for writing: busy is not broken).

    Beyond the header's magic bytes, DuckDB opens it read-only and reads its catalog, and the
    file must hold at least the blocks in use: a warehouse cut short after a valid
    header opens fine and fails only when a query reaches a missing block.
    """
    import duckdb

    path = path or warehouse_path()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):  # opening a FIFO would block until someone writes to it
        return "it is not a regular file"
    try:
        with open(path, "rb") as fh:
            head = fh.read(12)
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        if _duckdb_in_use(exc):  # e.g. a concurrent audit's dbt creating it: its header may not be written yet
            return None
        if head[8:12] != _DUCKDB_MAGIC:
            return "it is not a valid DuckDB database file" if head else "it is empty (0 bytes)"
        return f"DuckDB cannot open it ({first_line(exc)})"
    try:
        con.execute("select count(*) from duckdb_tables()").fetchall()
        block_size, blocks = con.execute(
            "select block_size, used_blocks from pragma_database_size() where database_name = current_database()"
        ).fetchall()[0]
    except duckdb.Error as exc:
        return f"DuckDB cannot read its catalog ({first_line(exc)})"
    finally:
        con.close()
    # only the blocks in use must fit: the header's total also counts free blocks, which DuckDB
    # may cut from the end of the file (a healthy warehouse was 262,144 bytes shorter than its total)
    expected = _DUCKDB_HEADERS + int(block_size) * int(blocks)
    if blocks and st.st_size < expected:
        return f"it is truncated ({st.st_size} bytes where its {blocks} blocks in use need {expected} bytes)"
    return None


def check_warehouse(path: Path | None = None) -> None:
    """Raise :class:`~ingestion.errors.WarehouseCorruptError` (with the recovery) when the
    warehouse file exists but is not a usable DuckDB database (:func:`warehouse_problem`)."""
    from ingestion.errors import WarehouseCorruptError

    path = path or warehouse_path()
    problem = warehouse_problem(path)
    if problem:
        raise WarehouseCorruptError(
            f"the warehouse {path} is corrupt: {problem}. Nothing is lost (the landing zone is the source "
            "of truth): run `dora audit` (or `dora audit --rebuild`) to move it aside and rebuild it from landing"
        )


def set_aside_corrupt_warehouse(path: Path | None = None, problem: str | None = None) -> Path | None:
    """Rename a corrupt warehouse (:func:`warehouse_problem`, or ``problem`` when the caller
    already found one) to ``warehouse.duckdb.corrupt-<UTC time>`` (with its ``.wal``), so the
    next dbt build recreates it from landing; returns the new path or ``None`` when the
    warehouse is fine or missing. Nothing is deleted."""
    from datetime import datetime, timezone

    path = path or warehouse_path()
    if not (problem or warehouse_problem(path)):
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    os.replace(path, aside)
    wal = path.with_name(path.name + ".wal")
    if wal.exists():
        os.replace(wal, aside.with_name(aside.name + ".wal"))
    return aside

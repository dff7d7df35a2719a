"""Landing shards that cannot be read: why (:func:`shard_problem`: not a regular file, an
unreadable footer, columns off the table's contract, data pages DuckDB cannot decode) and
moving one aside to ``$DORA_HOME/quarantine/<table>/`` with its reason
(:func:`quarantine_shard`, :class:`LandingSchemaWarning`). Nothing is deleted.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ingestion.errors import first_line
from ingestion.home import dora_home, glob_escape


class LandingSchemaWarning(UserWarning):
    """A landing shard broke its table's column contract, or could not be read, and was moved
    to quarantine."""


def not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` is not a regular file (read through symbolic links), without opening it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "it vanished while being checked"
    except OSError as exc:
        return f"cannot stat it ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    kind = (
        "a folder"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "of an unknown kind"
    )
    return f"not a regular file but {kind}, so it was not opened"


def shard_problem(path: Path, schema: pa.Schema, *, data: bool = True, con=None) -> str | None:
    """Why the landing shard at ``path`` does not fit ``schema``, or ``None`` if it does.

    A shard fits when it is a regular file, its footer can be read, each of its columns is a
    column of ``schema`` with the same Arrow type (a column it lacks, from a shard landed
    before the contract gained it, reads as NULL; anything else would widen the column under
    ``union_by_name``, e.g. ``run`` as a string turns every key into a string and makes every
    landed key look missing) and, with ``data``, DuckDB (the reader of the probes and of dbt)
    decodes every data page: a shard with a good footer and corrupt pages would fail every
    later read. A FIFO, socket, device or folder named ``*.parquet`` is never opened (opening
    a FIFO blocks until something writes to it, and nothing ever does).
    """
    if not os.path.lexists(path):
        return None  # quarantined or archived meanwhile
    problem = not_a_regular_file(path)
    if problem:
        return problem
    try:
        found = pq.read_schema(path)
    except Exception as exc:  # noqa: BLE001 - a corrupt or truncated file is a problem to report
        return f"unreadable Parquet ({type(exc).__name__}: {first_line(exc)})"
    wanted = {f.name: f.type for f in schema}
    bad = []
    for f in found:
        if f.name not in wanted:
            bad.append(f"unexpected column {f.name!r}")
        elif not f.type.equals(wanted[f.name]):
            bad.append(f"column {f.name!r} is {f.type}, expected {wanted[f.name]}")
    if bad:
        return "; ".join(bad)
    return _data_pages_problem(path, con) if data else None


def _data_pages_problem(path: Path, con=None) -> str | None:
    """Why DuckDB cannot decode every data page of the Parquet file ``path``, or ``None``.

    ``con``: an in-memory DuckDB connection to use (one per batch of shards: opening one per
    shard costs more than decoding a shard of a few hundred rows)."""
    import duckdb

    transient = (duckdb.OutOfMemoryException, duckdb.InterruptException)  # not the file's fault: raised
    own = con is None
    con = duckdb.connect() if own else con
    try:
        reader = con.sql("select * from read_parquet(?)", params=[glob_escape(path)]).to_arrow_reader(65536)
        for _ in reader:  # streamed: every page of every column is decoded, none is kept
            pass
    except transient:
        raise
    except duckdb.Error as exc:
        return f"corrupt data pages ({type(exc).__name__}: {first_line(exc)})"
    finally:
        if own:
            con.close()
    return None


def quarantine_shard(table: str, folder: Path, path: Path, problem: str) -> Path:
    """Move ``path`` (under ``folder``, the table's landing folder) to ``quarantine/<table>/``
    with a ``.reason.txt``, never over an earlier quarantined file, and warn with both paths."""
    import warnings

    target = dora_home() / "quarantine" / table / path.relative_to(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while os.path.lexists(target):  # the same name quarantined before: keep both
        target = target.with_name(f"{path.name}.{n}")
        n += 1
    os.replace(path, target)  # a rename: a FIFO or folder moves without being opened
    target.with_name(target.name + ".reason.txt").write_text(problem + "\n", encoding="utf-8")
    warnings.warn(
        f"landing shard {path} is unusable as part of {table!r} ({problem}): moved to {target}. "
        "Its rows are not read; fix and move it back to re-include them.",
        LandingSchemaWarning,
        stacklevel=3,
    )
    return target

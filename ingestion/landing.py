"""The landing zone: where raw inputs and model generations land durably, as Parquet shards.

Every producer (CrowS-Pairs loader, descriptor extractor, probes) writes immutable Parquet
shards under ``$DORA_HOME/landing/<table>/``; dbt reads them as external sources (the
``landing`` source: ``dbt_project/models/<family>/_<family>__sources.yml``, its location in
``dbt_project/dbt_project.yml``). Only dbt writes to the DuckDB warehouse, so
generation never contends for DuckDB's single-writer lock, and a crash loses at most the
batch being generated (shards are written to a temporary name, fsynced and renamed).

The column contract of each landing table is :data:`SCHEMAS`, merged from the contract module
of each family (``ingestion/contracts/<family>.py``; :mod:`ingestion.contracts`); the dbt
staging models rename nothing that is declared there.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import stat
import uuid
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

#: Column contract of every landing table (Arrow schemas): the ``SCHEMAS`` of every contract
#: module (``ingestion/contracts/<family>.py``, :mod:`ingestion.contracts`) merged, plus those
#: registered with :func:`register_contract`. ``stg_*`` models read these.
SCHEMAS: dict[str, pa.Schema] = {}
#: landing table -> the probe family whose contract declares it (``None``: shared by every family).
TABLE_FAMILIES: dict[str, str | None] = {}
#: contract module name -> the tables it declared (a module is merged once).
_CONTRACTS: dict[str, tuple[str, ...]] = {}
#: What a landing table may be called: it is also a folder, a Dagster asset key part and a dbt
#: source table name, so a plain lower-case identifier.
_TABLE_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register_contract(module) -> tuple[str, ...]:
    """Merge a landing contract module into :data:`SCHEMAS` and :data:`TABLE_FAMILIES`.

    Every module of :mod:`ingestion.contracts` is registered when this module is imported; a
    family outside the repository calls this from the module that defines its family record
    (``tests/toy_family/family.py``). Registering the same module again changes nothing.

    Args:
        module: a contract module, or its dotted name (imported): ``FAMILY`` (the owning
            family's name, or ``None`` for shared tables) and ``SCHEMAS`` (``{table: pa.Schema}``).

    Returns:
        The module's tables, in its order.

    Raises:
        ingestion.errors.LandingContractError: a table another contract module declares, a
            table name that is not a lower-case identifier, a value that is not a
            ``pyarrow.Schema``, or a module without ``FAMILY`` / ``SCHEMAS``.
    """
    import importlib

    from ingestion.errors import LandingContractError

    if isinstance(module, str):
        module = importlib.import_module(module)
    name = module.__name__
    if name in _CONTRACTS:
        return _CONTRACTS[name]
    family = getattr(module, "FAMILY", "")
    if not (family is None or (isinstance(family, str) and family)) \
            or not isinstance(getattr(module, "SCHEMAS", None), Mapping):
        raise LandingContractError(f"landing contract {name}: it must define FAMILY (a family name or None) and "
                                   "SCHEMAS ({table: pyarrow.Schema})")
    schemas = dict(module.SCHEMAS)
    for table, schema in schemas.items():
        owner = next((m for m, tables in _CONTRACTS.items() if table in tables),
                     "SCHEMAS" if table in SCHEMAS else None)
        if owner is not None:
            problem = f"table {table!r} is already declared by {owner}"
        elif not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
            problem = f"table name {table!r} is not a lower-case identifier ([a-z][a-z0-9_]*)"
        elif not isinstance(schema, pa.Schema):
            problem = f"table {table!r} maps to a {type(schema).__name__}, not a pyarrow.Schema"
        else:
            continue
        raise LandingContractError(f"landing contract {name}: {problem}")
    SCHEMAS.update(schemas)
    TABLE_FAMILIES.update(dict.fromkeys(schemas, family))
    _CONTRACTS[name] = tuple(schemas)
    return _CONTRACTS[name]


def family_tables(family: str | None) -> tuple[str, ...]:
    """The landing tables the contract of probe family ``family`` declares (``None``: the shared
    tables), in declaration order; empty for a family with no registered contract."""
    return tuple(table for table, owner in TABLE_FAMILIES.items() if owner == family)


def _register_shipped_contracts() -> None:
    """Register every module of :mod:`ingestion.contracts` (in name order), so a family's
    contract needs no line here."""
    import pkgutil

    import ingestion.contracts as contracts

    for info in pkgutil.iter_modules(contracts.__path__, f"{contracts.__name__}."):
        register_contract(info.name)


_register_shipped_contracts()

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
    """Path of the DuckDB warehouse file, ``$DORA_HOME/warehouse.duckdb``.

    Raises:
        ingestion.errors.DoraError: the home's path holds ``?`` or ``\\``: DuckDB (2.0) reads
            ``?`` as the start of connection options, even through a symlink, and cannot open a
            database there (its WAL lands elsewhere); it reads ``\\`` as ``/``, so it would look
            for the warehouse in another folder, call the healthy one corrupt and move it aside.
            Refused here, before any check of the warehouse can move anything.
    """
    path = dora_home() / "warehouse.duckdb"
    for char, why in (("?", "it reads '?' as the start of connection options"),
                      ("\\", "it reads '\\' as '/' and would open another file")):
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
        return f"DuckDB cannot open it ({_first_line(exc)})"
    try:
        con.execute("select count(*) from duckdb_tables()").fetchall()
        block_size, blocks = con.execute(
            "select block_size, used_blocks from pragma_database_size() where database_name = current_database()"
        ).fetchone()
    except duckdb.Error as exc:
        return f"DuckDB cannot read its catalog ({_first_line(exc)})"
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


# --- the landing zone on object storage (any fsspec URL) -----------------------------------
#: The landing zone on object storage: an fsspec URL (``s3://bucket/prefix``, ``gs://...``).
#: Unset: the local folder ``$DORA_HOME/landing``. Endpoint and credentials come from the
#: storage library's own environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...), never
#: from dora's code or files (docs/operations.md#object-storage-landing).
LANDING_URL_ENV = "DORA_LANDING_URL"


def landing_url() -> str | None:
    """The landing zone's object-storage URL (``$DORA_LANDING_URL``, trailing ``/`` removed), or
    ``None`` for the local landing folder.

    Raises:
        LandingLocationError: the value is not a URL with a protocol (``s3://bucket/prefix``),
            its protocol keeps files inside one process or on one machine (:data:`UNSHARED_PROTOCOLS`),
            fsspec knows no such protocol, or the package implementing it is not installed.
    """
    from ingestion.errors import LandingLocationError, shown

    url = os.environ.get(LANDING_URL_ENV, "").strip().rstrip("/")
    if not url:
        return None
    protocol, sep, rest = url.partition("://")
    if not sep or not protocol or not rest or protocol == "file":
        raise LandingLocationError(
            f"${LANDING_URL_ENV}={shown(url, quote=True)} is not an object-storage URL (e.g. s3://bucket/prefix); "
            "unset it to land in $DORA_HOME/landing"
        )
    for proto in protocol.split("::"):  # a chained URL (simplecache::s3://...): every link counts
        problem = _protocol_problem(proto)
        if problem:
            raise LandingLocationError(f"${LANDING_URL_ENV}={shown(url, quote=True)}: {problem}")
    return url


#: fsspec protocols whose files live inside one process (``memory``: each worker of a run would
#: land in its own copy, and the warehouse build would see none of it), on this machine only
#: (local files and caches: use ``$DORA_HOME`` instead), or that cannot be written (archives,
#: wrappers over another filesystem given in Python, not in a URL).
UNSHARED_PROTOCOLS = frozenset({
    "memory", "data", "reference", "generic", "dir", "async_wrapper", "asyncwrapper", "local", "file", "asynclocal",
    "blockcache", "cached", "filecache", "simplecache", "zip", "tar", "libarchive", "dask", "pyscript",
})


def _protocol_problem(proto: str) -> str | None:
    """Why fsspec ``proto`` cannot hold the landing zone (``None`` if it can): not shared between
    the processes of a run, unknown, or its package not installed (fsspec's registry names it)."""
    import fsspec
    from fsspec.registry import known_implementations

    from ingestion.errors import shown

    if proto in UNSHARED_PROTOCOLS:
        return (f"the {shown(proto, quote=True)} filesystem is not shared between processes (each step "
                "process would land in its own); use object storage (e.g. s3://bucket/prefix) or unset it to land in "
                "$DORA_HOME/landing")
    try:
        fsspec.get_filesystem_class(proto)
    except ValueError:
        return (f"fsspec knows no filesystem {shown(proto, quote=True)}; use object storage (e.g. s3://bucket/prefix) "
                "or unset it to land in $DORA_HOME/landing")
    except ImportError as exc:  # a known protocol whose package is missing (gs:// without gcsfs)
        known = known_implementations.get(proto, {})
        package = str(known.get("class", "")).split(".")[0]
        install = f": pip install {package}" if package and package != "fsspec" else ""
        reason = (str(known.get("err") or exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"the {proto!r} filesystem is not installed ({reason}){install}"
    return None


def landing_root():
    """Where every landing table's folder lives: ``$DORA_HOME/landing`` (a ``Path``), or the
    :func:`landing_url` as a ``upath.UPath`` (its ``fs`` is the fsspec filesystem).

    Raises:
        LandingLocationError: a malformed :data:`LANDING_URL_ENV`.
    """
    url = landing_url()
    if url is None:
        return dora_home() / "landing"
    from upath import UPath

    # no listings cache: workers land shards in the same folders at once, and a cached listing
    # made the filesystem answer "file not found" for a shard another worker landed after it
    # (DuckDB's read of a shard its glob had just found then failed)
    return UPath(url, use_listings_cache=False)


def is_remote(path) -> bool:
    """True for a landing path on object storage (not a local ``pathlib.Path``)."""
    return not isinstance(path, Path)


def register_landing(con) -> None:
    """Let the DuckDB connection ``con`` read the landing zone: on object storage, register its
    fsspec filesystem (``read_parquet('s3://...')`` and ``glob`` then go through it; it keeps no
    listings cache, :func:`landing_root`, so shards other workers landed are seen). Nothing to
    do for a local landing folder."""
    root = landing_root()
    if is_remote(root):
        con.register_filesystem(root.fs)


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
        problem = _not_a_regular_file(marker)
        if problem is None:
            try:
                pq.read_schema(marker)
            except Exception as exc:  # noqa: BLE001 - any unreadable marker is rewritten below
                problem = f"unreadable Parquet ({type(exc).__name__}: {_first_line(exc)})"
        if problem:  # a FIFO, a folder or garbage in the marker's place: set aside, never opened again
            _quarantine(table, folder, marker, problem)
    if not marker.exists() or not pq.read_schema(marker).equals(schema, check_metadata=False):
        # (re)written when the contract gained a column, so dbt's glob always sees every column
        _atomic_write(schema.empty_table(), marker)
    return folder


def _atomic_write(table: pa.Table, path: Path) -> None:
    if is_remote(path):
        # object storage: the shard goes up whole under a temporary key that no reader's
        # '*.parquet' glob matches, then is moved to its name (S3: a server-side copy, so the
        # final key appears complete or not at all)
        import io

        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        tmp = f"{path.parent.path}/.{path.name}.{uuid.uuid4().hex}.tmp"
        path.fs.pipe_file(tmp, buf.getvalue())
        path.fs.mv(tmp, path.path)
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


# --- paths are data; shards that break the contract are quarantined -------------


def glob_escape(path: str | Path) -> str:
    """``path`` with DuckDB/fnmatch glob metacharacters made literal (``[`` -> ``[[]``,
    ``*`` -> ``[*]``, ``?`` -> ``[?]``), so a folder named ``h[1]`` never matches ``h1``.

    The same escaping is done in Jinja for the dbt sources (``landing_root`` in ``dbt_project/dbt_project.yml``)."""
    return glob.escape(str(path))


def landing_glob(table: str) -> str:
    """The ``read_parquet`` glob covering every shard of a landing table.

    The ``$DORA_HOME`` part is escaped (:func:`glob_escape`): pass it as a ``?`` parameter,
    never interpolated into SQL. Shards that do not match the table's contract are moved
    to quarantine first (:func:`quarantine_bad_shards`), so the glob only sees good ones.
    """
    quarantine_bad_shards(table)
    return glob_escape(landing_dir(table)) + "/**/*.parquet"


#: Characters a home may hold and still be written into dbt's profile and SQL as is.
_PLAIN_PATH = re.compile(r"^[A-Za-z0-9 ._/+=,:@%~-]*$")


def dbt_home() -> Path:
    """The ``DORA_HOME`` to give dbt: the home itself when its path is plain, else a symlink to
    it with a plain name (``<tmp>/dora-homes-<uid>/<sha256 of the path>[:16]``).

    dbt-duckdb cuts the warehouse path at ``?`` and writes the catalog name into SQL unquoted
    (an apostrophe breaks every build), and the sources' ``read_parquet`` globs would read
    ``[`` ``*`` ``?`` as patterns: the alias keeps all of them out of dbt. It is
    deterministic, so the views dbt writes keep working; it is re-created when missing.
    """
    import hashlib
    import tempfile

    home = dora_home()
    if _PLAIN_PATH.match(str(home)):
        return home
    folder = Path(tempfile.gettempdir()) / f"dora-homes-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    alias = folder / hashlib.sha256(str(home).encode()).hexdigest()[:16]
    if not (alias.is_symlink() and Path(os.readlink(alias)) == home):
        tmp = folder / f".{alias.name}.{uuid.uuid4().hex}"
        tmp.symlink_to(home, target_is_directory=True)
        os.replace(tmp, alias)
    return alias


def dbt_target_dir(name: str) -> Path:
    """Where dbt keeps the artifacts of builds of this home's warehouse (``manifest.json``,
    ``run_results.json``, its log, ``partial_parse.msgpack``): ``<dbt_home()>/dbt/<name>``, one
    folder per caller (a Dagster step, the programmatic runner).

    Per home, because a parse is valid for one home only (dbt re-parses the whole project when
    the profile's warehouse path changes) and two homes built at once must not share one
    ``target/``; stable, so the next build of the same home parses only what changed. A new
    folder starts from the newest ``partial_parse.msgpack`` of the home's other folders (a
    copy, renamed into place): the home's first build of another step parses only what changed
    too, instead of the whole project (~3 s of CPU; dbt checks the file and re-parses what it
    no longer matches).
    """
    folder = dbt_home() / "dbt" / safe_path_component(name)
    seed = folder / "partial_parse.msgpack"
    if not seed.exists():
        others = [p for p in folder.parent.glob("*/partial_parse.msgpack") if p.parent != folder]
        if others:
            try:
                newest = max(others, key=lambda p: p.stat().st_mtime_ns)
                folder.mkdir(parents=True, exist_ok=True)
                tmp = folder / f".partial_parse.{os.getpid()}.tmp"
                shutil.copyfile(newest, tmp)
                os.replace(tmp, seed)
            except OSError:  # a folder removed meanwhile: this step parses the whole project
                pass
    return folder


class LandingSchemaWarning(UserWarning):
    """A landing shard broke its table's column contract, or could not be read, and was moved
    to quarantine."""


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


def _not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` is not a regular file (read through symbolic links), without opening it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "it vanished while being checked"
    except OSError as exc:
        return f"cannot stat it ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "of an unknown kind")
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
    problem = _not_a_regular_file(path)
    if problem:
        return problem
    try:
        found = pq.read_schema(path)
    except Exception as exc:  # noqa: BLE001 - a corrupt or truncated file is a problem to report
        return f"unreadable Parquet ({type(exc).__name__}: {_first_line(exc)})"
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
        return f"corrupt data pages ({type(exc).__name__}: {_first_line(exc)})"
    finally:
        if own:
            con.close()
    return None


def _quarantine(table: str, folder: Path, path: Path, problem: str) -> Path:
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
            moved.append(_quarantine(table, folder, path, problem))
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

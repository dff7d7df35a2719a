"""Read-only SQL over the warehouse (``dora query``).

The warehouse is opened with DuckDB's ``read_only=True`` and every statement is checked
before it runs: only reading statements (SELECT / WITH / SHOW / DESCRIBE / EXPLAIN / SUMMARIZE
and read-only PRAGMAs) are accepted, so ``insert``, ``drop``, ``attach``, ``copy``, ``set``
and friends are refused with a clear message. A statement's first keyword is not enough (DuckDB
accepts ``with x as (copy (select ...) to 'file') select * from x``, a SELECT that writes a
file): each reading statement's whole parse tree (DuckDB's own ``json_serialize_sql``) is walked
and every query node in it must be on an allow-list of reading nodes. While dbt holds DuckDB's writer lock the
connection is retried briefly, then :class:`WarehouseBusyError` says so.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import duckdb

from ingestion.errors import QueryRefusedError, QueryTimeoutError, WarehouseBusyError, WarehouseMissingError
from ingestion.home import dbt_home, dora_home
from ingestion.landing import select_sql
from ingestion.landing_location import landing_url, register_landing
from ingestion.warehouse import check_warehouse, warehouse_path

_READ_TYPES = {"SELECT", "EXPLAIN"}
# EXPLAIN ANALYZE executes the statement it explains ("explain analyze copy t to 'f.csv'"
# writes f.csv): an EXPLAIN is accepted only when what it explains is itself a SELECT.
_EXPLAIN_PREFIX = re.compile(r"^\s*explain\s*(\([^)]*\))?\s*(analy[sz]e\b)?", re.I)
_READ_PRAGMAS = ("show", "table_info", "database_size", "show_tables", "storage_info")
#: Query nodes that only read. Anything else in a statement's parse tree (COPY_QUERY_NODE: a
#: COPY ... TO nested in a CTE, a subquery, DESCRIBE / SUMMARIZE or EXPLAIN) is refused.
_READ_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})
#: Keywords that write, attach or configure. A PIVOT whose values are not listed parses as a
#: MULTI statement (DuckDB creates a temporary ENUM type of the pivot column's values, then
#: SELECTs), whose parse tree DuckDB cannot serialise: such a statement is accepted when it has
#: a PIVOT and none of these keywords (a writing node needs one: COPY ... TO, a DML statement).
_WRITING_KEYWORDS = frozenset(
    {
        "copy",
        "insert",
        "update",
        "delete",
        "merge",
        "create",
        "drop",
        "alter",
        "attach",
        "detach",
        "install",
        "load",
        "export",
        "import",
        "set",
        "reset",
        "pragma",
        "call",
        "checkpoint",
        "vacuum",
        "use",
        "truncate",
    }
)


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows (tuples) of a query."""

    columns: list[str]
    rows: list[tuple]


def _query_nodes(tree) -> set[str]:
    """Every query-node type (``"..._NODE"``) in a ``json_serialize_sql`` tree."""
    found, todo = set(), [tree]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            kind = item.get("type")
            if isinstance(kind, str) and kind.endswith("_NODE"):
                found.add(kind)
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return found


def _writing_nodes(select_sql: str) -> str | None:
    """Why a SELECT statement is not a pure read (a node outside :data:`_READ_NODES`, or a tree
    DuckDB cannot serialise), or ``None`` when every node of its parse tree only reads."""
    con = duckdb.connect(":memory:")
    try:
        tree = json.loads(con.execute("select json_serialize_sql(?)", [select_sql]).fetchall()[0][0])
    finally:
        con.close()
    if tree.get("error"):
        return f"its parse tree cannot be checked ({tree.get('error_message', 'unknown error')})"
    others = sorted(_query_nodes(tree) - _READ_NODES)
    if others:
        return "it contains " + ", ".join(n.removesuffix("_NODE").replace("_QUERY", "") for n in others)
    return None


#: DuckDB's names of PIVOT (``PIVOT_WIDER`` is its synonym).
_PIVOT_KEYWORDS = frozenset({"pivot", "pivot_wider"})


def _read_only_pivot(text: str) -> bool:
    """Whether a MULTI statement is a PIVOT that only reads (:data:`_WRITING_KEYWORDS`)."""
    keywords = {text[pos:].split(None, 1)[0].split("(", 1)[0].lower() for pos, kind in duckdb.tokenize(text) if kind == duckdb.token_type.keyword}
    return bool(keywords & _PIVOT_KEYWORDS) and not keywords & _WRITING_KEYWORDS


def check_read_only(sql: str) -> list[str]:
    """Split ``sql`` into statements and refuse any that is not a read.

    Returns:
        The statements' SQL texts.

    Raises:
        QueryRefusedError: a writing / attaching / configuration statement, or empty input.
        duckdb.ParserException: SQL that does not parse.
    """
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:  # e.g. a shell argument with invalid UTF-8 bytes
        raise QueryRefusedError(f"the SQL is not valid UTF-8 text (position {exc.start}); pass UTF-8 SQL") from None
    statements = duckdb.extract_statements(sql)
    if not statements:
        raise QueryRefusedError("no SQL statement given")
    for st in statements:
        kind = st.type.name
        text = st.query.strip()
        if kind == "EXPLAIN":
            explained = _EXPLAIN_PREFIX.sub("", text, count=1)
            inner = [s.type.name for s in duckdb.extract_statements(explained)]
            if inner and set(inner) == {"SELECT"}:
                why = _writing_nodes(explained)
                if why is None:
                    continue
                raise QueryRefusedError(f"dora query is read-only: refusing an EXPLAIN whose query writes: {why} ({text[:60]!r})")
            kind = f"EXPLAIN of a {inner[0] if inner else 'non-SELECT'}"
        elif kind in _READ_TYPES:
            why = _writing_nodes(text)
            if why is None:
                continue
            raise QueryRefusedError(
                f"dora query is read-only: refusing a SELECT that writes: {why} ({text[:60]!r}); "
                "COPY ... TO is not allowed anywhere in a query, nested or not"
            )
        if kind == "PRAGMA" and text.lower().removeprefix("pragma").strip().startswith(_READ_PRAGMAS):
            continue
        if kind == "MULTI" and _read_only_pivot(text):
            continue
        raise QueryRefusedError(
            f"dora query is read-only: refusing a {kind} statement ({text[:60]!r}). "
            "Only SELECT/WITH/SHOW/DESCRIBE/EXPLAIN are allowed; the warehouse is written by dbt only."
        )
    return [st.query for st in statements]


#: Environment variable: seconds a reader inside a pipeline run waits for the writer's lock.
#: ``dora audit`` / ``dora ui`` set it (orchestration/instance.py, as long as dbt's own retry
#: waits), so an asset that reads the warehouse while another partition's dbt build writes
#: it waits instead of failing; ``dora query`` keeps its 10 s.
WAIT_ENV = "DORA_WAREHOUSE_WAIT_SECONDS"


def connect_read_only(path: Path | None = None, *, wait_seconds: float | None = None) -> duckdb.DuckDBPyConnection:
    """Open the warehouse read-only, retrying while a writer holds the lock.

    Args:
        wait_seconds: how long to retry (default: ``$DORA_WAREHOUSE_WAIT_SECONDS``, else 10).

    Raises:
        WarehouseMissingError: the file does not exist. WarehouseBusyError: still locked
            after ``wait_seconds``.
    """
    path = path or warehouse_path()
    if not path.exists():
        raise WarehouseMissingError(f"no warehouse at {path}: run `dora audit` first (or set DORA_HOME)")
    check_warehouse(path)  # a corrupt file: say how to recover instead of a DuckDB traceback
    if wait_seconds is None:
        wait_seconds = float(os.environ.get(WAIT_ENV) or 10.0)
    deadline = time.monotonic() + wait_seconds
    delay = 0.1
    while True:
        try:
            con = duckdb.connect(str(path), read_only=True)
            register_landing(con)  # the staging views of a landing zone on object storage read through it
            return con
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                raise WarehouseBusyError(
                    f"the warehouse {path} is busy: another process (an audit's dbt build) is writing it. Try again in a few seconds."
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def lock_down(con: duckdb.DuckDBPyConnection, landing: Path) -> None:
    """Confine a read-only warehouse connection to the warehouse.

    External access is disabled except for the landing folder (the staging views read its
    Parquet shards; on object storage, the ``$DORA_LANDING_URL`` prefix), extensions are neither auto-installed nor auto-loaded, and the
    configuration is locked, so a ``select`` cannot call ``read_text('/etc/shadow')``, read
    ``/proc/self/environ`` (API keys), fetch a URL, install an extension or undo any of this.
    """
    con.execute("set autoinstall_known_extensions = false")
    con.execute("set autoload_known_extensions = false")
    allowed = [str(landing) + "/"]
    if landing.parent == dora_home():  # the views of an odd home read it through its alias
        allowed.append(str(dbt_home() / "landing") + "/")
    if url := landing_url():  # a landing zone on object storage (only its prefix)
        allowed.append(url + "/")
    con.execute("set allowed_directories = ?", [allowed])
    con.execute("set enable_external_access = false")
    con.execute("set lock_configuration = true")


def execute_query(
    sql: str, path: Path | None = None, *, wait_seconds: float = 10.0, params: Sequence | None = None, timeout: float | None = None
) -> QueryResult:
    """Run read-only SQL on the warehouse; the last statement's rows are returned.

    Args:
        params: values of the ``?`` placeholders (one statement only): values never go into SQL text.
        timeout: seconds the statements (and fetching their rows) may take; ``None`` or 0: no limit.
            A timer thread calls DuckDB's ``interrupt()``: a recursive CTE that never ends is stopped.

    Raises:
        QueryRefusedError, WarehouseBusyError, WarehouseMissingError, duckdb.Error.
        QueryTimeoutError: stopped after ``timeout`` s.
        ValueError: ``params`` with more than one statement.
    """
    import threading

    statements = check_read_only(sql)
    if params is not None and len(statements) != 1:
        raise ValueError("parameters need exactly one statement")
    con = connect_read_only(path, wait_seconds=wait_seconds)
    fired = threading.Event()

    def stop():
        fired.set()
        con.interrupt()

    timer = threading.Timer(timeout, stop) if timeout else None
    try:
        lock_down(con, (path or warehouse_path()).parent / "landing")
        if timer is not None:
            timer.daemon = True
            timer.start()
        cur = None
        for st in statements:
            cur = con.execute(st, params) if params is not None else con.execute(st)
        columns = [d[0] for d in cur.description] if cur is not None and cur.description else []
        rows = cur.fetchall() if cur is not None and columns else []
        return QueryResult(columns, rows)
    except duckdb.InterruptException:
        if fired.is_set():
            raise QueryTimeoutError(f"query stopped after {timeout:g} s (--timeout)") from None
        raise
    finally:
        if timer is not None:
            timer.cancel()
        con.close()


def _json_value(value):
    """``None`` for a non-finite float (NaN, +-Infinity), else ``value``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def read_relation(
    relation: str,
    *,
    columns: Sequence[str] | None = None,
    filters: Mapping[str, object] | None = None,
    order_by: Sequence[str] = (),
    path: Path | None = None,
) -> list[dict]:
    """Rows of one warehouse relation (a dbt model) as dicts, read-only, filtered with ``?`` parameters.

    Args:
        relation: the model's name (an identifier, e.g. ``fct_associations_to_score``).
        columns: columns to return (default: all).
        filters: ``{column: value}`` (``= ?``), ``{column: [values]}`` (``in (?, ...)``; empty
            matches nothing) or ``{column: None}`` (``is null``), ANDed.
        order_by: columns to sort by.

    Raises:
        ValueError: a relation or column name that is not a plain identifier.
        WarehouseMissingError, WarehouseBusyError: see :func:`connect_read_only`.
    """
    names = [relation, *(columns or ()), *(filters or {}), *order_by]
    bad = [n for n in names if not _IDENTIFIER.match(n)]
    if bad:
        raise ValueError(f"not plain identifiers: {bad}")
    sql, params = select_sql(f'"{relation}"', columns, filters, order_by)
    con = connect_read_only(path)
    try:
        cur = con.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()


_LITERAL = re.compile(r"'((?:[^']|'')*)'")
#: Key columns stored lower-case (docs/method.md#1-descriptors normalises descriptors; words are
#: lower-cased when parsed) and the public relation that holds every value of them.
CASE_FOLDED_KEYS = ("descriptor", "word", "bias_dimension")


def case_hint(sql: str, path: Path | None = None) -> str | None:
    """Why a query may have matched no row: a string literal with capitals that equals a stored
    descriptor / word / bias dimension when compared case-insensitively (they are stored
    lower-case, so ``descriptor = 'Old person'`` matches nothing). Only the key columns the SQL
    names are checked.

    Returns:
        One line naming the literal and the stored value, or ``None`` (no such literal, or
        ``fct_association_dimensions`` is not built). Values go in as ``?`` parameters.
    """
    literals = sorted({m.group(1).replace("''", "'") for m in _LITERAL.finditer(sql)} - {""})
    literals = [lit for lit in literals if lit != lit.lower()]
    # only the keys the query names: 'White' in a ModSCAN query is not BiasDora's descriptor 'white'
    keys = [col for col in CASE_FOLDED_KEYS if re.search(rf"\b{col}\b", sql, re.I)]
    if not literals or not keys:
        return None
    checks = " union all ".join(
        f"(select '{col}' as col, {col} as stored, ? as literal from fct_association_dimensions where lower({col}) = lower(?) limit 1)"
        for _lit in literals
        for col in keys
    )
    params = [v for lit in literals for _col in keys for v in (lit, lit)]
    try:
        found = execute_query(checks, path, params=params).rows
    except duckdb.Error:
        return None
    if not found:
        return None
    col, stored, literal = found[0]
    return (
        f"hint: no row matched, and {literal!r} is {col} {stored!r} compared case-insensitively: "
        f"descriptors, words and bias dimensions are stored lower-case (write {stored!r}, or lower({col}) = lower(...))"
    )


def one_line_sql_error(exc: BaseException) -> str:
    """DuckDB's whole error text on one line: every line of it (the message, its "Did you mean"
    / "Candidate bindings" suggestions, ``LINE n:`` and the query text there) joined by " | ",
    the caret line under the position left out (it points at nothing once joined)."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    return " | ".join(ln for ln in lines if ln and set(ln) != {"^"})


def matched_nothing(result: QueryResult) -> bool:
    """No row, or one row of zeros / nulls (``select count(*) ... where descriptor = 'X'``)."""
    if not result.columns:
        return False
    return not result.rows or (len(result.rows) == 1 and all(v in (0, None) for v in result.rows[0]))


def is_q_column(name: str) -> bool:
    """Whether a column holds a q- or p-value (``fisher_q``, ``change_q``, ``q_before``,
    ``paper_p_value``, ...), shown by :func:`format_q`."""
    name = name.lower()
    return name in ("q", "p") or name.endswith(("_q", "_p", "p_value")) or name.startswith(("q_", "p_"))


def format_q(value) -> str:
    """A q- or p-value for display: scientific notation, 3 significant digits (0.0498 ->
    ``4.98e-02``), because a fixed-point rounding shows 0.0498 as 0.05, on the wrong side of
    the 0.05 cut-off. ``None`` / NaN (no test) -> ``"n/a"``."""
    if value is None or (isinstance(value, float) and value != value):
        return "n/a"
    return f"{float(value):.2e}"


def format_result(result: QueryResult, fmt: str = "table") -> str:
    """Render a :class:`QueryResult` as ``table`` (tabulate), ``csv`` or ``json`` (records)."""
    if fmt == "json":  # NaN / Infinity are not JSON: they become null
        records = [dict(zip(result.columns, map(_json_value, r), strict=True)) for r in result.rows]
        return json.dumps(records, default=str, indent=1, allow_nan=False)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(result.columns)
        writer.writerows(result.rows)
        return buf.getvalue()
    if fmt == "table":
        from tabulate import tabulate

        # q- / p-values in scientific notation: ".4g" would print 0.049996 as 0.05
        qs = [i for i, c in enumerate(result.columns) if is_q_column(c)]
        rows = (
            result.rows
            if not qs
            else [tuple(format_q(v) if i in qs and isinstance(v, (float, int)) else v for i, v in enumerate(r)) for r in result.rows]
        )
        return tabulate(rows, headers=result.columns, tablefmt="simple", floatfmt=".4g", disable_numparse=qs or False)
    raise ValueError(f"unknown format {fmt!r}; expected table, csv or json")

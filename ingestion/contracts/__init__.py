"""Landing contracts: each probe family declares the column contract of its landing tables here,
in a module of its own (``ingestion/contracts/<family>.py``); the tables every family writes to
(the audit log ``audits``, the quarantined input rows ``input_quarantine``) are in
:mod:`ingestion.contracts.shared`.

A contract module holds two names and imports nothing of dora's:

* ``FAMILY``: the probe family that owns its tables (the ``name`` of its
  ``orchestration.family.ProbeFamily``, which reads its ``landing_tables`` from here), or
  ``None`` for tables shared by every family;
* ``SCHEMAS``: ``{landing table: pyarrow.Schema}``, one entry per table, its comments saying
  who lands it and what one row is. A table name is also its landing folder
  (``$DORA_HOME/landing/<table>/``), its Dagster asset key (``landing/<table>``) and its dbt
  source table (``source('landing', '<table>')``, listed in
  ``dbt_project/models/staging/<family>/_<family>__sources.yml``).

This package is also the registry: importing it imports every module of the package and merges
their tables into :data:`SCHEMAS` (below, with :data:`TABLE_FAMILIES` and :func:`family_tables`).
A family that lives outside this
repository writes a module of the same shape anywhere importable and registers it with
:func:`register_contract` from the module that defines its family record, so
every process that imports the family has its contract.
"""

from __future__ import annotations

import re
from typing import Mapping

import pyarrow as pa

#: Column contract of every landing table (Arrow schemas): the ``SCHEMAS`` of every contract
#: module (``ingestion/contracts/<family>.py``, :mod:`ingestion.contracts`) merged, plus those
#: registered with :func:`register_contract`. ``stg_*`` models read these.
SCHEMAS: dict[str, pa.Schema] = {}
#: landing table -> the probe family whose contract declares it (``None``: shared by every family).
TABLE_FAMILIES: dict[str, str | None] = {}
#: contract module name -> the tables it declared (a module is merged once).
_CONTRACTS: dict[str, tuple[str, ...]] = {}
#: probe family -> the modules of its own DuckDB functions (its contract's ``DUCKDB_FUNCTIONS``).
FUNCTION_MODULES: dict[str | None, tuple[str, ...]] = {}
#: What a landing table may be called: it is also a folder, a Dagster asset key part and a dbt
#: source table name, so a plain lower-case identifier.
_TABLE_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register_contract(module) -> tuple[str, ...]:
    """Merge a landing contract module into :data:`SCHEMAS` and :data:`TABLE_FAMILIES`.

    Every module of :mod:`ingestion.contracts` is registered when this module is imported; a
    family outside the repository calls this from the module that defines its family record
    (a family plugged in through ``$DORA_FAMILIES``). Registering the same module again changes nothing.

    Args:
        module: a contract module, or its dotted name (imported): ``FAMILY`` (the owning
            family's name, or ``None`` for shared tables) and ``SCHEMAS`` (``{table: pa.Schema}``);
            optionally ``DUCKDB_FUNCTIONS``, the modules of the family's own DuckDB functions
            (each with ``register_functions(con)``; registered by ``analytics/duckdb_plugin.py``).

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
    if not (family is None or (isinstance(family, str) and family)) or not isinstance(getattr(module, "SCHEMAS", None), Mapping):
        raise LandingContractError(f"landing contract {name}: it must define FAMILY (a family name or None) and SCHEMAS ({{table: pyarrow.Schema}})")
    schemas = dict(module.SCHEMAS)
    for table, schema in schemas.items():
        owner = next((m for m, tables in _CONTRACTS.items() if table in tables), "SCHEMAS" if table in SCHEMAS else None)
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
    functions = tuple(getattr(module, "DUCKDB_FUNCTIONS", ()))
    if functions:
        FUNCTION_MODULES[family] = (*FUNCTION_MODULES.get(family, ()), *functions)
    _CONTRACTS[name] = tuple(schemas)
    return _CONTRACTS[name]


def family_tables(family: str | None) -> tuple[str, ...]:
    """The landing tables the contract of probe family ``family`` declares (``None``: the shared
    tables), in declaration order; empty for a family with no registered contract."""
    return tuple(table for table, owner in TABLE_FAMILIES.items() if owner == family)


def duckdb_function_modules(family: str | None = None) -> tuple[str, ...]:
    """The modules of the DuckDB functions the contract of ``family`` declares (``None``: of
    every registered family, in registration order)."""
    if family is not None:
        return FUNCTION_MODULES.get(family, ())
    return tuple(m for modules in FUNCTION_MODULES.values() for m in modules)


def _register_shipped_contracts() -> None:
    """Register every module of :mod:`ingestion.contracts` (in name order), so a family's
    contract needs no line here."""
    import pkgutil

    import ingestion.contracts as contracts

    for info in pkgutil.iter_modules(contracts.__path__, f"{contracts.__name__}."):
        register_contract(info.name)


_register_shipped_contracts()

"""Render a dbt model's SQL with the project's macros, without a dbt parse.

dbt models are Jinja; the SQL tests of single marts render the model file with ``ref(name) ->
name`` and run it on an in-memory DuckDB. The project's macros (``dbt_project/macros/``) are
loaded as dbt loads them, one macro per template, so a macro may call another and a macro's
``{{ return(value) }}`` hands ``value`` (a list, a bool) to its caller, as in dbt.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import jinja2

PROJECT = Path(__file__).resolve().parents[2] / "dbt_project"
_MACRO_BLOCK = re.compile(r"{%-?\s*macro\s.*?{%-?\s*endmacro\s*-?%}", re.S)


class _MacroReturn(Exception):
    def __init__(self, value):
        self.value = value


def _return(value):
    raise _MacroReturn(value)


def _returning(macro):
    def call(*args, **kwargs):
        try:
            return macro(*args, **kwargs)
        except _MacroReturn as returned:
            return returned.value

    return call


@functools.cache
def macro_globals() -> dict:
    """Every macro of ``dbt_project/macros/`` by name, callable from a template's globals (read once;
    do not mutate)."""
    env = jinja2.Environment(extensions=["jinja2.ext.do"])
    names: dict = {"return": _return}
    for path in sorted((PROJECT / "macros").rglob("*.sql")):
        for block in _MACRO_BLOCK.findall(path.read_text()):
            # One template per macro: a call to another macro resolves through the shared
            # globals (the returning wrapper), not the template's own unwrapped definition.
            module = env.from_string(block, globals=names).make_module()
            names.update({n: _returning(getattr(module, n)) for n in dir(module) if not n.startswith("_")})
    return names


def render_model(path: Path, **context) -> str:
    """The SQL of the dbt model at ``path`` with ``ref(name) -> name`` and ``config()`` empty.

    ``context`` adds or overrides template names (``is_incremental=lambda: False`` ...).
    """
    names = dict(macro_globals())
    names.update(ref=lambda model: model, config=lambda **kw: "")
    names.update(context)
    env = jinja2.Environment(extensions=["jinja2.ext.do"])
    return env.from_string(path.read_text(), globals=names).render()


def broken_rules(home: Path, model: str) -> list[tuple[str, int]]:
    """The rules of ``model``'s ``model_rules`` data test (dbt_project/tests/generic/model_rules.sql)
    that the warehouse of ``home`` breaks, as ``(rule, failing rows)``: its compiled SQL, which the
    last ``invoke_dbt`` of that home wrote (``<home>/dbt/invoke_dbt/compiled/``), run read-only."""
    import duckdb

    from ingestion.home import dbt_home

    compiled = (dbt_home() / "dbt" / "invoke_dbt" / "compiled").rglob("model_rules_*.sql")
    (sql,) = [path for path in compiled if path.parent.name == f"{model}.yml"]  # dbt cuts long test names
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return sorted((rule, n) for _, rule, n in con.execute(sql.read_text()).fetchall())

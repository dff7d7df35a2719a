"""``dora tables``: the public relations of the warehouse and their columns, from the dbt YAML.

The documentation of every relation lives once, in the YAML beside its model
(``dbt_project/models/<layer>/<family>/<model>.yml``, descriptions that may use the doc blocks
of ``dbt_project/models/**/*.md``); this module reads it, so ``dora tables`` never drifts
from what dbt documents.

Public relations are the models of the ``marts/`` folders (by the project's convention every
one is a ``fct_*``, ``agg_*`` or ``dim_*``): what ``dora query``, ``dora report`` and
``dora diff`` read. Staging and intermediate models are dbt's working steps; they are listed
by ``dora tables --all`` and can be queried, but their columns may change.

A relation that holds every family's rows (the audit log ``stg_audits``, ``dim_audits``) says
so in its YAML (``config: meta: shared: true``) and is listed as shared, not under the family
whose folder holds its SQL.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ingestion.errors import UnknownRelationError, shown

#: Prefixes of public relations (fact, aggregate and dimension tables).
PUBLIC_PREFIXES = ("fct_", "agg_", "dim_")
_DOC_BLOCK = re.compile(r"{%-?\s*docs\s+(\w+)\s*-?%}(.*?){%-?\s*enddocs\s*-?%}", re.S)
_DOC_REF = re.compile(r"{{\s*doc\(\s*['\"](\w+)['\"]\s*\)\s*}}")


@dataclass(frozen=True)
class Relation:
    """One documented dbt model: its family (second folder), layer (first folder), name,
    description and ``(column, description)`` pairs in the YAML's order; ``shared``: it holds
    every family's rows (``config: meta: shared: true`` in its YAML)."""

    family: str
    layer: str
    name: str
    description: str
    columns: tuple[tuple[str, str], ...]
    shared: bool = False

    @property
    def listed_under(self) -> str:
        """The heading ``dora tables`` lists it under: :data:`SHARED` or its family."""
        return SHARED if self.shared else self.family

    @property
    def is_public(self) -> bool:
        return self.layer == "marts" or self.name.startswith(PUBLIC_PREFIXES)

    @property
    def summary(self) -> str:
        """The description's first sentence on one line (without the "PUBLIC CONTRACT:" tag),
        cut at :data:`SUMMARY_CHARS`."""
        return first_sentence(re.sub(r"^\s*PUBLIC( CONTRACT)?\s*(\([^)]*\))?\s*[:.]\s*", "", self.description))


#: The heading of the relations shared by every family in ``dora tables``.
SHARED = "shared by every family"
#: Longest one-line description ``dora tables`` prints.
SUMMARY_CHARS = 150
_ABBREVIATIONS = ("e.g", "i.e", "App", "Eq", "Fig", "vs", "cf", "al")


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (a ". " outside parentheses that does not end an
    abbreviation such as "e.g."), whitespace folded, at most :data:`SUMMARY_CHARS` characters."""
    text = " ".join(text.split())
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "." and depth <= 0 and text[i + 1 : i + 2] in ("", " ") and not text[:i].endswith(_ABBREVIATIONS) and not text[i - 1 : i].isdigit():
            text = text[: i + 1]
            break
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 3].rstrip() + "..."


def _models_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "dbt_project" / "models"


def _resolve(text: str, docs: dict[str, str]) -> str:
    """``{{ doc('name') }}`` replaced by the doc block's text; whitespace folded to one line."""
    return " ".join(_DOC_REF.sub(lambda m: docs.get(m.group(1), m.group(0)), text or "").split())


@lru_cache(maxsize=1)
def relations() -> tuple[Relation, ...]:
    """Every model documented in ``dbt_project/models/**/*.yml``, sorted by family, layer, name.

    Raises:
        yaml.YAMLError: a YAML file that does not parse (the dbt project is broken).
    """
    import yaml

    root = _models_dir()
    docs: dict[str, str] = {}
    for md in sorted(root.rglob("*.md")):
        docs.update({name: body.strip() for name, body in _DOC_BLOCK.findall(md.read_text(encoding="utf-8"))})
    found = []
    for path in sorted(root.rglob("*.yml")):
        parts = path.relative_to(root).parts
        if len(parts) < 3:  # sources and project-wide files
            continue
        for model in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("models") or []:
            cols = tuple((c["name"], _resolve(c.get("description", ""), docs)) for c in model.get("columns") or [])
            shared = bool(((model.get("config") or {}).get("meta") or {}).get("shared"))
            found.append(Relation(parts[1], parts[0], model["name"], _resolve(model.get("description", ""), docs), cols, shared))
    # the shared relations first, then each family's
    return tuple(sorted(found, key=lambda r: (not r.shared, r.family, r.layer != "marts", r.layer, r.name)))


def tables_text(include_all: bool = False) -> str:
    """The listing of ``dora tables``: the relations shared by every family (:data:`SHARED`),
    then per family, one line per relation (name: first sentence)."""
    lines: list[str] = []
    family = None
    for rel in relations():
        if not (include_all or rel.is_public):
            continue
        if rel.listed_under != family:
            family = rel.listed_under
            lines += [*([""] if lines else []), f"{family}:"]
        tag = "" if rel.is_public else f" [{rel.layer}]"
        lines.append(f"  {rel.name}{tag}: {rel.summary}")
    lines += ["", 'columns of one relation: dora tables NAME; its rows: dora query "select * from NAME limit 10"']
    return "\n".join(lines)


def relation(name: str) -> Relation:
    """The documented relation ``name`` (case-insensitive).

    Raises:
        UnknownRelationError: no dbt model of that name (the message suggests close names).
    """
    by_name = {r.name: r for r in relations()}
    rel = by_name.get(name) or by_name.get(name.lower())
    if rel is None:
        close = difflib.get_close_matches(name.lower(), list(by_name), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; list them with: dora tables"
        raise UnknownRelationError(f"no relation {shown(name, quote=True)} is documented in dbt_project/models{hint}")
    return rel


def columns_text(name: str, types: dict[str, str] | None = None) -> str:
    """The listing of ``dora tables NAME``: the relation's description, then one line per column
    (name, DuckDB type when ``types`` has it, description).

    Raises:
        UnknownRelationError: see :func:`relation`.
    """
    rel = relation(name)
    types = types or {}
    width = max((len(c) for c, _ in rel.columns), default=0)
    owner = "shared by every family" if rel.shared else rel.family
    lines = [f"{rel.name} ({owner}, {rel.layer}{'' if rel.is_public else ', not public'}): {rel.description}", ""]
    for col, desc in rel.columns:
        kind = f" [{types[col]}]" if col in types else ""
        lines.append(f"  {col.ljust(width)}{kind}  {desc}")
    extra = sorted(set(types) - {c for c, _ in rel.columns})
    if extra:
        lines += ["", "  in the warehouse but not documented: " + ", ".join(extra)]
    return "\n".join(lines)


__all__ = ["PUBLIC_PREFIXES", "SHARED", "Relation", "columns_text", "first_sentence", "relation", "relations", "tables_text"]

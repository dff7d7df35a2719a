"""A registry target's fields that belong to a probe family (BiasDora's ``probe``, ``scorers``,
``judges``, ``checks``): declared by the family, in ``ingestion/<family>/target_fields.py``, and
validated by :class:`ingestion.registry.AuditTarget` with the type the family gives, so the
registry itself names no family and knows no family's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["register_target_fields", "target_fields"]

#: field name -> (type, default, check or None): the registry target fields the families declare
#: (:func:`target_fields`).
_TARGET_FIELDS: dict[str, tuple[Any, Any, Any]] = {}
#: the names of the target's own fields (``AuditTarget``'s, filled by ``ingestion.registry``): no
#: family may declare one.
RESERVED: set[str] = set()
#: module name -> the fields it declared (a module is registered once).
_FIELD_MODULES: dict[str, tuple[str, ...]] = {}


def register_target_fields(module) -> tuple[str, ...]:
    """Declare a family's own fields of a registry target (a top-level key of a target).

    The modules ``ingestion/<family>/target_fields.py`` are registered by :func:`target_fields`
    itself; a family kept outside this repository calls this from the module of its record.
    Registering the same module again changes nothing.

    Args:
        module: a module, or its dotted name (imported), with ``TARGET_FIELDS``: ``{field: (type,
            default, check)}``: any type pydantic validates (a model, ``list[str]``, ...), the
            value when the file leaves the field out, and ``None`` or a callable
            ``(parsed value, the target's other fields as a dict) -> [problem, ...]``, each
            problem ``"<field>.<part>: <message>"``.

    Returns:
        The module's fields.

    Raises:
        ValueError: a field another module declares, or a field of ``AuditTarget`` itself.
    """
    import importlib

    if isinstance(module, str):
        module = importlib.import_module(module)
    if module.__name__ in _FIELD_MODULES:
        return _FIELD_MODULES[module.__name__]
    reserved = RESERVED
    declared = dict(module.TARGET_FIELDS)
    for name in declared:
        owner = next((m for m, names in _FIELD_MODULES.items() if name in names), None)
        if owner is not None or name in reserved:
            raise ValueError(f"target field {name!r} of {module.__name__} is already declared by {owner or 'AuditTarget'}")
    _TARGET_FIELDS.update(declared)
    _FIELD_MODULES[module.__name__] = tuple(declared)
    return _FIELD_MODULES[module.__name__]


def target_fields() -> dict[str, tuple[Any, Any, Any]]:
    """Every family's own registry target fields: ``{field: (type, default, check)}``
    (:func:`register_target_fields`), the shipped families' found in their folders of
    ``ingestion/`` (a ``target_fields`` module), so no family is named here."""
    if not _FIELD_MODULES.get("__shipped__"):
        import importlib.util
        import pkgutil

        import ingestion

        _FIELD_MODULES["__shipped__"] = ("",)
        for info in pkgutil.iter_modules(ingestion.__path__, "ingestion."):
            if info.ispkg and importlib.util.find_spec(f"{info.name}.target_fields") is not None:
                register_target_fields(f"{info.name}.target_fields")
    return _TARGET_FIELDS


def _loc(loc: tuple) -> str:
    """A pydantic error location as the registry spells it: ``.runs``, ``[1]``."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _message(err: Mapping[str, Any]) -> str:
    """A pydantic error's message as the registry says it (one line)."""
    if err["type"] == "extra_forbidden":
        return "unknown field (typo?)"
    if err["type"] == "missing":
        return "required field is missing"
    return err["msg"].removeprefix("Value error, ")

"""The probe families dora hosts: one tuple every entry point iterates.

Adding a family = its homes (its landing contract ``ingestion/contracts/<f>.py``,
``models_inference/probes/<f>/``, ``orchestration/defs/<f>/`` with a ``family.py`` declaring its
:class:`~orchestration.family.ProbeFamily`, ``dbt_project/models/<layer>/<f>/`` (its sources
file in ``staging/<f>/``), ``analytics/<f>*.py``, ``docs/families/<f>.md``) + one line in
:data:`SHIPPED_FAMILY_MODULES` (ARCHITECTURE.md, "Adding a probe family"); a family kept outside
the repository names its record's module in ``$DORA_FAMILIES`` instead. The
Dagster definitions, ``dora audit`` (``--family``, flags, run config, dry run, summary),
``dora diff --family``, ``dora report`` and ``dora families`` read this tuple and nothing else.

Importing this module imports each family's Config classes (Dagster, ~1 s) but no asset
module: a family's assets load when :attr:`ProbeFamily.assets` is called.
"""

from __future__ import annotations

import importlib
import os

from ingestion.errors import FamilyModuleError
from orchestration.family import ProbeFamily

#: The modules of the probe families dora ships, each declaring its record as ``FAMILY``, in
#: ``--help`` and summary order: the families list, the one line a new family adds.
SHIPPED_FAMILY_MODULES: tuple[str, ...] = (
    "orchestration.defs.biasdora.family",
    "orchestration.defs.counterfactual.family",
    "orchestration.defs.modscan.family",
    "orchestration.defs.vlstereoset.family",
)

#: Further family modules, comma-separated, loaded after the shipped ones: a family kept outside
#: this repository (importable from ``sys.path``) is plugged in here, through the same loader.
FAMILY_MODULES_ENV = "DORA_FAMILIES"


def family_modules() -> tuple[str, ...]:
    """The shipped family modules, then those named in ``$DORA_FAMILIES`` (blanks ignored)."""
    extra = (name.strip() for name in os.environ.get(FAMILY_MODULES_ENV, "").split(","))
    return (*SHIPPED_FAMILY_MODULES, *(name for name in extra if name))


def load_families(modules: tuple[str, ...]) -> tuple[ProbeFamily, ...]:
    """The :class:`ProbeFamily` declared as ``FAMILY`` by each module, in order (a module named
    twice counts once).

    Raises:
        FamilyModuleError: a module that cannot be imported, that declares no ``FAMILY`` record,
            or whose family's name another module's family already has (one line naming it).
    """
    found: dict[str, ProbeFamily] = {}
    owner: dict[str, str] = {}
    for name in dict.fromkeys(modules):
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise FamilyModuleError(f"probe family module {name} cannot be imported ({exc}); check ${FAMILY_MODULES_ENV}") from exc
        family = getattr(module, "FAMILY", None)
        if not isinstance(family, ProbeFamily):
            raise FamilyModuleError(f"probe family module {name} declares no FAMILY = ProbeFamily(...)")
        if family.name in found:
            raise FamilyModuleError(f"probe family module {name}: family {family.name!r} is already declared by {owner[family.name]}")
        found[family.name], owner[family.name] = family, name
    return tuple(found.values())


#: Every probe family, in ``--help`` and summary order.
FAMILIES: tuple[ProbeFamily, ...] = load_families(family_modules())


def family_names() -> tuple[str, ...]:
    """``dora audit --family`` / ``dora diff --family`` choices."""
    return tuple(f.name for f in FAMILIES)


def get_family(name: str) -> ProbeFamily:
    """The family called ``name``.

    Raises:
        KeyError: no such family (the message lists the known ones).
    """
    for family in FAMILIES:
        if family.name == name:
            return family
    raise KeyError(f"unknown probe family {name!r}; families: {', '.join(family_names())}")


def change_tests() -> list:
    """The ``analytics.family_diff.FamilyChangeTest`` of every family that has one."""
    return [f.change_test for f in FAMILIES if f.change_test is not None]


def op_configs() -> dict[str, type]:
    """Op name -> Config class of the audit job's configurable ops, over every family."""
    return {op: cls for family in FAMILIES for op, cls in family.configs.items()}


__all__ = [
    "FAMILIES",
    "FAMILY_MODULES_ENV",
    "SHIPPED_FAMILY_MODULES",
    "change_tests",
    "family_modules",
    "family_names",
    "get_family",
    "load_families",
    "op_configs",
]

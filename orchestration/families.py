"""The probe families dora hosts: one tuple every entry point iterates.

Adding a family = its homes (its landing contract ``ingestion/contracts/<f>.py``,
``models_inference/probes/<f>/``, ``orchestration/defs/<f>/`` with a ``family.py`` declaring its
:class:`~orchestration.family.ProbeFamily`, ``dbt_project/models/<layer>/<f>/`` (its sources
file in ``staging/<f>/``), ``analytics/<f>*.py``, ``docs/families/<f>.md``) + one line in :data:`FAMILIES` (the few lines
it needs in shared non-Python files: ARCHITECTURE.md, "Adding a probe family"). The
Dagster definitions, ``dora audit`` (``--family``, flags, run config, dry run, summary),
``dora diff --family``, ``dora report`` and ``dora families`` read this tuple and nothing else.

Importing this module imports each family's Config classes (Dagster, ~1 s) but no asset
module: a family's assets load when :attr:`ProbeFamily.assets` is called.
"""

from __future__ import annotations

from orchestration.defs.biasdora.family import FAMILY as BIASDORA
from orchestration.defs.counterfactual.family import FAMILY as COUNTERFACTUAL
from orchestration.defs.modscan.family import FAMILY as MODSCAN
from orchestration.defs.vlstereoset.family import FAMILY as VLSTEREOSET
from orchestration.family import ProbeFamily

#: Every probe family, in ``--help`` and summary order.
FAMILIES: tuple[ProbeFamily, ...] = (BIASDORA, COUNTERFACTUAL, MODSCAN, VLSTEREOSET)


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


__all__ = ["FAMILIES", "change_tests", "family_names", "get_family", "op_configs"]

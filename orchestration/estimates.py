"""``dora audit --dry-run``'s time estimate: the steps every audit runs, then each selected
family's own (its record's ``estimate``: model load, generation, scoring, dbt), each saying
whether its time is measured or assumed, and their sum.

The figures are wall times on the 2-core machine of BENCHMARKS.md ("The dry run's estimate
against the audit it plans"); a busier machine takes longer, which the text says. Names no
family: the families come from :data:`orchestration.families.FAMILIES` through the caller.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from orchestration.family import EstimatedStep, ProbeFamily

#: What every ``dora audit`` costs whatever its families: Python's start, the Dagster run, the
#: audit log's asset. ``bench_incremental``'s re-run of a finished audit from the shell (~18 s)
#: less its two dbt builds (3.6 s + 2.7 s), which the families' steps count.
SHARED_STEPS: tuple[EstimatedStep, ...] = (
    EstimatedStep("start-up and Dagster run", 18.0 - (3.6 + 2.7), "measured", "bench_incremental's re-run from the shell, less its dbt builds"),
)


def duration(seconds: float) -> str:
    """``"2 min 05 s"`` (``"1 h 02 min"`` from an hour on), rounded to the second."""
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def load_factor(load: float | None = None, cores: int | None = None) -> float:
    """How much slower than on a free machine an audit runs now: ``max(1, (L + 2) / C)`` for a
    1-minute load average ``L`` (the machine's now, unless given) on ``C`` usable cores. An
    assumption, not a measurement: the audit's CPU-bound steps (2 torch threads, or dbt's 2)
    get a fair share of the cores beside the ``L`` processes already runnable (the steps' rates
    in BENCHMARKS.md were measured with 2 threads on 2 cores)."""
    load = os.getloadavg()[0] if load is None else load
    return max(1.0, (load + 2) / (cores or usable_cores()))


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def estimate_steps(families: Iterable[ProbeFamily], ops: Mapping[str, Any], *, model_version: str | None = None) -> list[tuple[str, EstimatedStep]]:
    """Every step of the audit ``ops`` configures, as ``(family name or "every audit", step)``:
    :data:`SHARED_STEPS`, then each of ``families`` that has an ``estimate`` (a family whose
    probes are off returns none). Loads no model.

    Raises:
        whatever a family's estimate raises (a plan over the row cap, an unreadable input).
    """
    rows = [("every audit", step) for step in SHARED_STEPS]
    for family in families:
        if family.estimate is not None:
            rows += [(family.name, step) for step in family.estimate(ops, model_version=model_version)]
    return rows


def format_estimate(rows: list[tuple[str, EstimatedStep]], *, load: float | None = None, cores: int | None = None) -> str:
    """The estimate as ``dora audit --dry-run`` prints it: one line per step (family, step, time,
    measured / assumed / unknown and where from), then the total of the known steps on a free
    machine, how many are unknown and, given the machine's 1-minute ``load`` average on
    ``cores``, the total at that load (:func:`load_factor`)."""
    out = ["estimated time per step (measured rates from BENCHMARKS.md; what is assumed says so):"]
    for family, step in rows:
        time = duration(step.seconds) if step.seconds is not None else "unknown"
        out.append(f"  {family}: {step.step}: {time} ({step.basis}: {step.source})")
    known = [step.seconds for _, step in rows if step.seconds is not None]
    unknown = len(rows) - len(known)
    assumed = sum(1 for _, step in rows if step.basis == "assumed")
    out.append(
        f"  total: {duration(sum(known))} on a free machine"
        + (f" plus {unknown} step(s) of unknown time" if unknown else "")
        + (f" ({assumed} step(s) assumed)" if assumed else "")
    )
    if load is not None:
        factor = load_factor(load, cores)
        out.append(
            f"  at the machine's load now ({load:.1f} on {cores} cores): about {duration(sum(known) * factor)} "
            f"(x{factor:.1f}; assumed: the CPU-bound steps get a fair share of the cores beside the processes already running)"
        )
    return "\n".join(out)


def estimate_text(families: Iterable[ProbeFamily], ops: Mapping[str, Any], *, model_version: str | None = None) -> str:
    """:func:`format_estimate` of :func:`estimate_steps` at the machine's load now."""
    return format_estimate(estimate_steps(families, ops, model_version=model_version), load=os.getloadavg()[0], cores=usable_cores())


__all__ = ["SHARED_STEPS", "duration", "estimate_steps", "estimate_text", "format_estimate", "load_factor", "usable_cores"]

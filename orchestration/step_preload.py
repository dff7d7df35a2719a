"""Imported once by the multiprocess executor's fork server (:func:`orchestration.cluster.execution_config`),
before it forks one process per step: what every step process would otherwise import again.

A forked step process inherits the server's modules and caches. ``orchestration.definitions``
brings dora and Dagster's execution code, but a step also opens the Dagster instance (its
SQLite storage, secrets loader, state storage on ``upath``/``fsspec``: ~470 modules Dagster
imports lazily), dora's backends import ``openai`` and ``pandas`` when they run, and each step
rebuilt the job from its reconstructable pointer (every asset bound to its resources, ~0.3 s;
Dagster caches it per pointer). Measured on three partitions audited at once
(``tests/test_fault_tolerance.py``), 43 step processes spent 52 s of CPU on those imports and
~20 s on rebuilding the job.

Opening the instance of ``$DAGSTER_HOME`` here (then closing it) imports what a step's opening
imports, whatever the storage configured; nothing of it is kept for the forked processes (an
open SQLite connection must not cross a fork). Failing here only costs the saving: the fork
server ignores a preload module that raises ``ImportError``, and other errors are swallowed.
"""

from __future__ import annotations


def _warm() -> None:
    import os

    import openai  # noqa: F401  (the OpenAI-compatible backends)
    import pandas  # noqa: F401  (landing reads, scorers)
    from dagster import reconstructable

    from orchestration.definitions import audit_job_for_multiprocess

    reconstructable(audit_job_for_multiprocess).get_definition()  # the job each step process loads

    if not os.environ.get("DAGSTER_HOME"):
        return
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        instance.run_storage, instance.event_log_storage  # noqa: B018  (their modules load on first use)
        ref = instance.get_ref()
        ref.defs_state_storage  # noqa: B018


try:
    _warm()
except Exception:  # pragma: no cover - a warm-up only: the steps import what they need anyway
    pass

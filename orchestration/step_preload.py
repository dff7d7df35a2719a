"""Imported once by the multiprocess executor's fork server (:func:`orchestration.cluster.execution_config`),
before it forks one process per step: what every step process would otherwise import again, and
the console level of the step processes' first line (below).

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

It also keeps the step processes' terminal as quiet as the run asked. A step process announces
itself ("Executing step ... in subprocess", a DEBUG event) through a log manager built before
the run's config is read (Dagster's ``create_context_free_log_manager``), whose console logger
is at Dagster's default level (DEBUG, or the instance's ``python_logs.python_log_level``), not the
run's: every step of ``dora audit --executor multiprocess`` printed one such line on the
terminal although the run's console logger is at CRITICAL. :func:`_step_start_at_run_level`
builds that log manager with the run's own console level (``loggers.console.config.log_level``
of the run config) when the run sets one; the event still goes to the run's event log, as every
event does, and a run that sets no level keeps Dagster's behaviour.
"""

from __future__ import annotations


def _console_level(run_config) -> str | None:
    """The run's console log level (``loggers: console: config: log_level``), or None."""
    console = ((run_config or {}).get("loggers") or {}).get("console") or {}
    return (console.get("config") or {}).get("log_level")


def _step_start_at_run_level() -> None:
    """Build the step process's context-free log manager (``dagster._core.executor.multiprocess``)
    with the run's console level; Dagster's own function when the run sets none."""
    from dagster._core.execution.context.logger import InitLoggerContext
    from dagster._core.executor import multiprocess
    from dagster._core.log_manager import DagsterLogManager
    from dagster._loggers import default_system_loggers

    dagster_own = multiprocess.create_context_free_log_manager
    if getattr(dagster_own, "_dora_run_level", False):
        return

    def create_context_free_log_manager(instance, dagster_run):
        level = _console_level(dagster_run.run_config)
        if level is None:
            return dagster_own(instance, dagster_run)
        # Dagster's function with one change: the console logger's level is the run's
        loggers = [
            logger_def.logger_fn(InitLoggerContext({**config, "log_level": level}, logger_def, job_def=None, run_id=dagster_run.run_id))
            for logger_def, config in default_system_loggers(instance)
        ]
        return DagsterLogManager.create(loggers=loggers, instance=instance, dagster_run=dagster_run)

    create_context_free_log_manager._dora_run_level = True
    multiprocess.create_context_free_log_manager = create_context_free_log_manager


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
    _step_start_at_run_level()
except Exception:  # pragma: no cover - Dagster's internals moved: its own (noisier) log manager stays
    pass
try:
    _warm()
except Exception:  # pragma: no cover - a warm-up only: the steps import what they need anyway
    pass

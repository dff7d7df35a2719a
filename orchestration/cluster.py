"""Where the steps of an audit run: dora's one executor choice (``in_process``, ``multiprocess``,
``celery``) for ``dora audit --executor``, the UI and the scheduled re-audits.

The embedded default runs every step in the ``dora audit`` process. ``multiprocess`` runs each
step in its own process on this machine. ``celery`` hands each step to Dagster's Celery
executor (``dagster-celery``, the ``cluster`` extra): a broker (Redis) queues the steps, and
workers started with the standard ``dagster-celery worker start -A dagster_celery.app -y
<celery.yaml>`` on any machine run them (docs/operations.md#running-on-a-cluster). The workers
must see the same Dagster instance (``$DAGSTER_HOME``: SQLite on one machine, PostgreSQL for a
cluster), the same ``DORA_HOME`` (or a landing zone on object storage) and dora installed.

Every model-calling step of a family is split into blocks of its keys (mapped steps,
``orchestration/defs/common.py: block_outputs``), so the work spreads over the workers.

Names: :data:`EXECUTORS`, :data:`BROKER_ENV` / :data:`DEFAULT_BROKER` (the Redis URL),
:data:`EXECUTOR_ENV` (the choice of the scheduled re-audits, read at tick time);
:func:`execution_config` is the run config of a choice; :data:`dora_executor` the job's executor.
Nothing here runs at import, and ``dagster-celery`` is imported only when ``celery`` is chosen.
"""

from __future__ import annotations

import os

import dagster as dg

#: The executor choices, in the order ``dora audit --executor`` lists them.
EXECUTORS = ("in_process", "multiprocess", "celery")
#: The Celery broker (and result backend) URL: ``--celery-broker``, else this variable, else the default.
BROKER_ENV = "DORA_CELERY_BROKER"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
#: The executor of runs dora does not start from the CLI (the re-audit schedule, the new-version
#: sensor): set it in the environment of ``dagster-daemon`` (``celery`` for a cluster).
EXECUTOR_ENV = "DORA_EXECUTOR"
#: Steps the multiprocess executor runs at once on this machine.
MULTIPROCESS_MAX_CONCURRENT = 2


def broker_url(flag: str | None = None) -> str:
    """The Celery broker URL: ``flag``, else ``$DORA_CELERY_BROKER``, else :data:`DEFAULT_BROKER`."""
    return flag or os.environ.get(BROKER_ENV) or DEFAULT_BROKER


def execution_config(executor: str, broker: str | None = None) -> dict:
    """The ``execution`` run config of an executor choice.

    ``multiprocess``: at most :data:`MULTIPROCESS_MAX_CONCURRENT` steps at once, forked from a
    server that has already imported dora and what a step opens (``orchestration/step_preload.py``;
    ~5 s of imports saved per step). ``celery``: broker
    and result backend both :func:`broker_url` (a Redis URL serves as both).

    Raises:
        ValueError: an executor not in :data:`EXECUTORS`.
    """
    if executor == "in_process":
        return {"config": {"in_process": {}}}
    if executor == "multiprocess":
        start = {"forkserver": {"preload_modules": ["orchestration.definitions", "orchestration.step_preload"]}}
        return {"config": {"multiprocess": {"max_concurrent": MULTIPROCESS_MAX_CONCURRENT, "start_method": start}}}
    if executor == "celery":
        url = broker_url(broker)
        return {"config": {"celery": {"broker": url, "backend": url}}}
    raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")


def scheduled_execution_config() -> dict | None:
    """The ``execution`` run config of the runs the daemon starts (schedule, sensor): from
    ``$DORA_EXECUTOR`` (and ``$DORA_CELERY_BROKER``) at tick time; ``None`` (the job's default,
    multiprocess) when unset.

    Raises:
        ValueError: ``$DORA_EXECUTOR`` is not one of :data:`EXECUTORS`.
    """
    choice = os.environ.get(EXECUTOR_ENV)
    return execution_config(choice) if choice else None


def quiet_celery_warnings() -> None:
    """Silence the warning dagster-celery triggers at every step it queues (it registers its
    ``execute_plan`` task again each time; the first registration is the one used): noise in
    the terminal of ``dora audit --executor celery``, not a fault."""
    import warnings

    warnings.filterwarnings("ignore", message=r"Task name 'execute_plan' is already registered")


def celery_available() -> bool:
    """Whether ``dagster-celery`` is installed (``pip install -e '.[cluster]'``)."""
    import importlib.util

    return importlib.util.find_spec("dagster_celery") is not None


def _celery_schema() -> dict:
    if not celery_available():
        return {}
    from dagster_celery.executor import CELERY_CONFIG

    return {"celery": CELERY_CONFIG}


def _requirements(config) -> list:
    if "multiprocess" in config or "celery" in config:
        return dg.multiple_process_executor_requirements()
    return []


@dg.executor(
    name="dora",
    config_schema=dg.Field(
        dg.Selector({**dg.multi_or_in_process_executor.config_schema.config_type.fields, **_celery_schema()}),
        default_value={"multiprocess": {}},
    ),
    requirements=_requirements,
)
def dora_executor(init_context):
    """Dagster's multiprocess / in-process executor (its own config), or, with ``celery:``,
    ``dagster_celery``'s Celery executor with its own config (broker, backend, include,
    config_source, retries) and a submission loop that always ends
    (:class:`orchestration.celery_loop.DoraCeleryExecutor`)."""
    config = init_context.executor_config
    if "celery" in config:
        from dagster._core.execution.retries import RetryMode

        from orchestration.celery_loop import DoraCeleryExecutor

        # dagster_celery's executor with a submission loop that always ends (orchestration/celery_loop.py)
        celery = config["celery"]  # validated against dagster_celery's schema, defaults filled in
        return DoraCeleryExecutor(
            retries=RetryMode.from_config(celery["retries"]), broker=celery.get("broker"), backend=celery.get("backend"),
            include=celery.get("include"), config_source=celery.get("config_source"),
        )
    return dg.multi_or_in_process_executor.executor_creation_fn(init_context)

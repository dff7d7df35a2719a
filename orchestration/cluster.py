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
:data:`EXECUTOR_ENV` (the choice of the scheduled re-audits, read at tick time),
:data:`WORKER_TIMEOUT_ENV` / :data:`DEFAULT_WORKER_TIMEOUT` (how long a run waits for a worker);
:func:`execution_config` is the run config of a choice; :data:`dora_executor` the job's executor.
Nothing here runs at import, and ``dagster-celery`` is imported only when ``celery`` is chosen.
"""

from __future__ import annotations

import os

import dagster as dg

from ingestion.errors import BrokerError

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


#: URL schemes of kombu's transports a worker on another process can share (kombu's own
#: aliases). Anything else makes kombu import a module of that name ("notaurl" ->
#: ModuleNotFoundError, seconds into the run).
BROKER_SCHEMES = frozenset(
    {
        "redis",
        "rediss",
        "sentinel",
        "amqp",
        "amqps",
        "pyamqp",
        "librabbitmq",
        "qpid",
        "sqs",
        "mongodb",
        "zookeeper",
        "consul",
        "etcd",
        "filesystem",
        "azurestoragequeues",
        "azureservicebus",
        "gcpubsub",
        "confluentkafka",
        "sqla+sqlite",
        "sqla+postgresql",
        "sqla+mysql",
    }
)
#: Default of ``dora audit --celery-worker-timeout``: seconds the audit waits for a worker to answer,
#: before the run starts and during it (no worker at all, or the one that took a step).
DEFAULT_WORKER_TIMEOUT = 120.0
#: The worker timeout of runs dora does not start from the CLI (the daemon's), read at tick time.
WORKER_TIMEOUT_ENV = "DORA_CELERY_WORKER_TIMEOUT"
#: Seconds ``dora audit`` waits for the broker to accept a connection before it fails.
BROKER_CONNECT_SECONDS = 5.0


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe to print)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:  # a port that is not a number: keep only the scheme
        return url.split("://", 1)[0] + "://***"


def broker_problem(url: str) -> str | None:
    """Why ``url`` cannot be a Celery broker of dora's workers (no ``scheme://``, a scheme no
    kombu transport has, the in-process ``memory://``), or ``None``."""
    scheme, sep, _ = url.partition("://")
    scheme = scheme.lower()
    if not sep or not scheme:
        return f"{redacted(url)!r} is not a broker URL: expected scheme://host..., e.g. {DEFAULT_BROKER}"
    if scheme == "memory":
        return f"memory:// is a broker inside one process: workers in other processes never see its tasks; use Redis, e.g. {DEFAULT_BROKER}"
    if scheme not in BROKER_SCHEMES:
        return (
            f"{scheme}:// is not a Celery (kombu) broker transport: expected one of "
            f"{', '.join(sorted(s for s in BROKER_SCHEMES if '+' not in s))}, e.g. {DEFAULT_BROKER}"
        )
    return None


def wait_for_worker(url: str, timeout: float, say=None, *, notice_after: float = 2.0, connect_timeout: float = BROKER_CONNECT_SECONDS) -> int:
    """Until a Celery worker answers a ping on broker ``url``.

    ``say(line)`` gets one line once no worker has answered for ``notice_after`` s. Without a
    worker the Celery executor queues the steps and waits for ever, silently: this wait is what
    bounds it.

    Returns:
        The number of workers that answered.

    Raises:
        BrokerError: the broker does not accept a connection within ``connect_timeout`` s, or no
            worker answered within ``timeout`` s (0: wait for ever).
    """
    import time

    from celery import Celery

    shown = redacted(url)
    app = Celery("dora-worker-check", broker=url, backend=None, set_as_current=False)
    app.conf.broker_connection_timeout = connect_timeout
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0.2, interval_step=0.2, timeout=connect_timeout)
    except Exception as exc:  # noqa: BLE001 - kombu / redis / amqp errors differ per transport
        cause = " ".join(str(exc).split()).rstrip(".") or type(exc).__name__
        raise BrokerError(
            f"cannot reach the Celery broker {shown}: {cause}; start it, or pass --celery-broker (or ${BROKER_ENV}) the URL of a running one"
        ) from None
    started = time.monotonic()
    said = False
    try:
        while True:
            replies = app.control.ping(timeout=1.0) or []
            if replies:
                return len(replies)
            waited = time.monotonic() - started
            if timeout and waited >= timeout:
                raise BrokerError(
                    f"no Celery worker answered on {shown} within {timeout:.0f} s (--celery-worker-timeout); start one "
                    "with `dagster-celery worker start -A dagster_celery.app -y <celery.yaml>` "
                    "(docs/operations.md#running-on-a-cluster)"
                )
            if not said and waited >= notice_after and say is not None:
                said = True
                limit = f"up to {timeout:.0f} s (--celery-worker-timeout)" if timeout else "with no time limit"
                say(
                    f"waiting for a Celery worker on {shown}, {limit}; start one with `dagster-celery worker start "
                    "-A dagster_celery.app -y <celery.yaml>` (docs/operations.md#running-on-a-cluster)"
                )
    finally:
        app.close()


def execution_config(executor: str, broker: str | None = None, worker_timeout: float | None = None) -> dict:
    """The ``execution`` run config of an executor choice.

    ``multiprocess``: at most :data:`MULTIPROCESS_MAX_CONCURRENT` steps at once, forked from a
    server that has already imported dora and what a step opens (``orchestration/step_preload.py``;
    ~5 s of imports saved per step). ``celery``: broker
    and result backend both :func:`broker_url` (a Redis URL serves as both); ``worker_timeout``
    (seconds, 0: no limit) is how long the run waits for a worker that does not answer
    (``orchestration/celery_loop.py``): given, else ``$DORA_CELERY_WORKER_TIMEOUT``, else the
    executor's default :data:`DEFAULT_WORKER_TIMEOUT` (left out of the config).

    Raises:
        ValueError: an executor not in :data:`EXECUTORS`; ``$DORA_CELERY_WORKER_TIMEOUT`` not a
            number of seconds >= 0.
    """
    if executor == "in_process":
        return {"config": {"in_process": {}}}
    if executor == "multiprocess":
        start = {"forkserver": {"preload_modules": ["orchestration.definitions", "orchestration.step_preload"]}}
        return {"config": {"multiprocess": {"max_concurrent": MULTIPROCESS_MAX_CONCURRENT, "start_method": start}}}
    if executor == "celery":
        url = broker_url(broker)
        celery = {"broker": url, "backend": url}
        timeout = worker_timeout if worker_timeout is not None else _env_worker_timeout()
        if timeout is not None:
            celery["worker_timeout"] = float(timeout)
        return {"config": {"celery": celery}}
    raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")


def _env_worker_timeout() -> float | None:
    """``$DORA_CELERY_WORKER_TIMEOUT`` in seconds, or None when unset.

    Raises:
        ValueError: not a number >= 0 (one line naming the variable).
    """
    text = os.environ.get(WORKER_TIMEOUT_ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise ValueError(f"${WORKER_TIMEOUT_ENV}={text!r}: expected seconds >= 0 (0: no limit)")
    return value


def scheduled_execution_config() -> dict | None:
    """The ``execution`` run config of the runs the daemon starts (schedule, sensor): from
    ``$DORA_EXECUTOR`` (and ``$DORA_CELERY_BROKER``, ``$DORA_CELERY_WORKER_TIMEOUT``) at tick
    time; ``None`` (the job's default, multiprocess) when unset. A Celery run started this way
    has no ``dora audit`` to wait for a worker first: its submission loop fails it when no worker
    answers within the worker timeout (``orchestration/celery_loop.py``).

    Raises:
        ValueError: ``$DORA_EXECUTOR`` is not one of :data:`EXECUTORS`, or
            ``$DORA_CELERY_WORKER_TIMEOUT`` is not a number of seconds >= 0.
    """
    choice = os.environ.get(EXECUTOR_ENV)
    return execution_config(choice) if choice else None


def quiet_celery_warnings() -> None:
    """Silence the warning dagster-celery triggers at every step it queues (it registers its
    ``execute_plan`` task again each time; the first registration is the one used): noise in
    the terminal of ``dora audit --executor celery``, not a fault."""
    import warnings

    warnings.filterwarnings("ignore", message=r"Task name 'execute_plan' is already registered")
    _quiet_lost_result_cleanup()


def _quiet_lost_result_cleanup() -> None:
    """Drop the traceback Python prints ("Exception ignored in: <function AsyncResult.__del__>")
    when a Celery result is garbage-collected after its broker went away: ``AsyncResult.__del__``
    unsubscribes from the result backend (Redis pub/sub) and that fails with a connection error
    the run has already reported once, as one line. Any other unraisable exception still
    reaches the previous hook."""
    import sys

    previous = sys.unraisablehook
    if getattr(previous, "_dora_quiet_celery", False):
        return

    def hook(unraisable):
        where, exc = getattr(unraisable.object, "__qualname__", ""), unraisable.exc_value
        # redis' ConnectionError is not the builtin one: matched by name as well
        if where == "AsyncResult.__del__" and (isinstance(exc, OSError) or "Connection" in type(exc).__name__):
            return
        previous(unraisable)

    hook._dora_quiet_celery = True
    sys.unraisablehook = hook


def celery_available() -> bool:
    """Whether ``dagster-celery`` is installed (``pip install -e '.[cluster]'``)."""
    import importlib.util

    return importlib.util.find_spec("dagster_celery") is not None


def _celery_schema() -> dict:
    if not celery_available():
        return {}
    from dagster_celery.executor import CELERY_CONFIG

    timeout = dg.Field(
        float,
        is_required=False,
        default_value=DEFAULT_WORKER_TIMEOUT,
        description="Seconds the run waits for a Celery worker that does not answer (none at all while steps "
        "wait, or the one that took a step) before it fails; 0: no limit (orchestration/celery_loop.py).",
    )
    return {"celery": {**CELERY_CONFIG, "worker_timeout": timeout}}


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
    config_source, retries) and dora's ``worker_timeout``, and a submission loop that always
    ends and watches the workers (:class:`orchestration.celery_loop.DoraCeleryExecutor`)."""
    config = init_context.executor_config
    if "celery" in config:
        from dagster._core.execution.retries import RetryMode

        from orchestration.celery_loop import DoraCeleryExecutor

        # dagster_celery's executor with a submission loop that always ends (orchestration/celery_loop.py)
        celery = config["celery"]  # validated against dagster_celery's schema, defaults filled in
        return DoraCeleryExecutor(
            retries=RetryMode.from_config(celery["retries"]),
            broker=celery.get("broker"),
            backend=celery.get("backend"),
            include=celery.get("include"),
            config_source=celery.get("config_source"),
            worker_timeout=celery.get("worker_timeout", DEFAULT_WORKER_TIMEOUT),
            shown_broker=redacted(celery.get("broker") or "the default broker"),
        )
    return dg.multi_or_in_process_executor.executor_creation_fn(init_context)

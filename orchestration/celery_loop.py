"""Dagster's Celery executor with a step-submission loop that always reaches an end.

``dagster-celery`` (0.29) stops submitting steps once a Celery task fails outside its step (a
worker process killed mid-step gives ``WorkerLostError``; so does a task that raises before the
step starts), but keeps looping until its execution plan is complete. A step that becomes ready
after that failure (its upstream ran on another worker and succeeded) is then never submitted
nor abandoned: the plan never completes, and the run spins at full CPU for ever instead of
failing. Seen with a T2T block's worker killed while the image branch was still running on
the other worker.

:class:`DoraCeleryExecutor` is ``dagster_celery``'s ``CeleryExecutor`` with that loop mended:
after such a failure it goes on submitting the steps whose upstream succeeded, as Dagster's
multiprocess executor does after a crashed step process, while the lost step's downstream is
abandoned (Dagster marks a step that ended without a success or failure event as in an
unknown state). The run then ends failed, with the task's error, once every step has an end.
Everything else (task submission, priorities, queues, revoking on interrupt) is
``dagster_celery``'s own code, called as is.

The loop also watches the workers (:class:`WorkerWatch`), because a task whose whole worker is
gone (its main process killed, its machine lost) never gets a result: Celery acknowledges a
task when a worker starts it, so nobody redelivers it, and the loop would wait for it for
ever. Every :data:`WATCH_SECONDS` while tasks are in flight it asks the workers which of them
hold which task (a broadcast ``query_task``; the worker that took a step is also named by the
step's "Executing steps ... in celery worker" event). A step whose worker has not answered for
the worker timeout (``worker_timeout``, ``dora audit --celery-worker-timeout``,
``$DORA_CELERY_WORKER_TIMEOUT`` for the daemon's runs) is failed as lost, its task revoked, and
the other steps go on; when no worker at all has answered for that long while steps wait (none
was ever started, or all are gone), the run fails with one line
(:class:`ingestion.errors.CeleryWorkerError`). Before either, one line says what the run waits
for and for how long. A worker answers from its main process while its pool runs a step
(prefork, the default, or threads); a ``--pool solo`` worker cannot answer while it runs one.

Imported only when the ``celery`` executor is chosen (``dagster-celery`` is the ``cluster`` extra).
"""

from __future__ import annotations

import sys
import threading
import time

from dagster._core.errors import DagsterInvariantViolationError, DagsterSubprocessError
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._utils.error import serializable_error_info_from_exc_info
from dagster_celery.core_execution_loop import (
    DELEGATE_MARKER,
    _get_run_priority,
    _get_step_priority,
    _warn_on_priority_misuse,
)
from dagster_celery.executor import CeleryExecutor, _submit_task
from dagster_celery.make_app import make_app
from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG, DAGSTER_CELERY_STEP_PRIORITY_TAG
from dagster_shared.serdes import deserialize_value

#: Seconds between two looks at the tasks in flight (dagster_celery waits 1 s). A step that
#: ends waits up to a tick before its downstream is submitted, and an audit is a chain of ~25
#: mostly short steps: at 1 s a tick, the waits were most of a small audit's time on the
#: cluster. A look asks the result backend (Redis) once per task in flight.
TICK_SECONDS = 0.1
#: Seconds between two checks of the workers holding the tasks in flight (:class:`WorkerWatch`).
WATCH_SECONDS = 2.0
#: Seconds the workers have to answer one check (the reply window of a Celery broadcast). A
#: check returns as soon as every worker of the previous check answered, so it waits this long
#: only when one is missing; it runs in a thread beside the loop, which it never holds up.
REPLY_SECONDS = 1.0
#: Seconds without an answer before the run says, in one line, what it waits for.
NOTICE_SECONDS = 2.0
#: The engine event metadata key naming the worker that runs a step (dagster_celery's task sets it).
WORKER_METADATA_KEY = "Celery worker"


class DoraCeleryExecutor(CeleryExecutor):
    """``dagster_celery``'s executor (same config, same workers) running :func:`celery_execution_loop`.

    Args:
        worker_timeout: seconds a run waits for a worker to answer (none at all, or the one that
            took a step) before it fails (0: wait for ever, saying so).
        shown_broker: the broker URL as messages show it (its password redacted).
        The rest: ``CeleryExecutor``'s.
    """

    def __init__(self, *args, worker_timeout: float, shown_broker: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.worker_timeout, self.shown_broker = float(worker_timeout), shown_broker

    def execute(self, plan_context, execution_plan):
        return celery_execution_loop(plan_context, execution_plan, step_execution_fn=_submit_task)


class WorkerWatch:
    """Which Celery worker holds each task in flight, and how long a worker (or every worker)
    has not answered; see the module docstring.

    Args:
        app: a Celery app on the executor's broker, the watch's own (it runs in a thread).
        broker: the broker URL as messages show it (its password redacted: ``orchestration.cluster.redacted``).
        timeout: seconds without an answer before :meth:`check` gives up (0: never).
        records: ``records(cursor) -> (records, cursor)`` of the run's engine events, where the
            worker that took a step names itself; None: only the broadcasts are used.
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(self, app, broker: str, timeout: float, records=None, clock=time.monotonic):
        self.app, self.broker, self.timeout, self.records, self.clock = app, broker, timeout, records, clock
        self.workers: set[str] = set()  # the hostnames that answered the last check
        self.holders: dict[str, str] = {}  # task id -> hostname of the worker seen holding it
        self.silent_since: dict[str, float] = {}  # hostname -> when it first did not answer
        self.orphan_since: dict[str, float] = {}  # task id -> since when its worker answers without holding it
        self.none_since: float | None = None  # when no worker answered, since
        self.noticed: set[str] = set()  # what a line was said about already
        self.submitted: dict[str, float] = {}  # task id -> wall-clock time of submission
        self._cursor = None
        self._named: dict[str, tuple[str, float]] = {}  # step key -> (worker named by its event, event time)

    def _ask(self, ids: list[str], limit: int | None) -> dict[str, dict] | None:
        """``{hostname: {task id: [state, info]}}`` of the workers that answered, or None when
        the broker cannot be asked."""
        try:
            return self.app.control.inspect(timeout=REPLY_SECONDS, limit=limit).query_task(*ids) or {}
        except Exception:  # noqa: BLE001 - kombu / redis errors differ per transport: no worker can answer then
            return None

    def _names_from_events(self) -> None:
        if self.records is None:
            return
        try:
            found, self._cursor = self.records(self._cursor)
        except Exception:  # noqa: BLE001 - the event log is a second source only; the broadcasts decide
            return
        for step_key, host, at in found:
            self._named[step_key] = (host, at)

    def check(self, in_flight: dict[str, str]) -> tuple[dict[str, str], list[str], str | None]:
        """One check of the tasks in flight (step key -> task id, none of them ready).

        Returns:
            (lost, notices, failure): the steps to fail as lost (step key -> why, one clause);
            lines to say once (what the run waits for, and how long); the run's failure
            message when no worker has answered for the timeout, else None.
        """
        now = self.clock()
        ids = list(in_flight.values())
        replies = self._replies(ids)
        answered = set(replies or {})
        self._note_holders(in_flight, replies, now)
        limit = f"up to {self.timeout:.0f} s (--celery-worker-timeout)" if self.timeout else "with no time limit"
        if not answered:
            return self._none_answers(in_flight, replies is None, limit, now)
        self.none_since = None
        return (*self._lost_steps(in_flight, replies, limit, now), None)

    def _replies(self, ids: list[str]) -> dict | None:
        """Which worker holds which of the tasks ``ids`` (host -> its tasks), ``None`` when the
        broker cannot be reached; asked once more, with the whole reply window for every
        worker, when one expected is missing."""
        expected = len(self.workers)
        replies = self._ask(ids, expected or None)
        if replies is not None and (len(replies) < expected or any(self.holders.get(t) not in (None, *replies) for t in ids)):
            replies = self._ask(ids, None)  # someone is missing: every worker gets the whole reply window
        return replies

    def _note_holders(self, in_flight: dict[str, str], replies: dict | None, now: float) -> None:
        """Record who holds each task (from the replies, else from the run's events) and since
        when each worker has been silent."""
        ids = list(in_flight.values())
        answered = set(replies or {})
        for host, held in (replies or {}).items():
            for task_id in held or {}:
                self.holders[task_id] = host
        if any(task_id not in self.holders for task_id in ids):
            self._names_from_events()
            for step_key, task_id in in_flight.items():
                named = self._named.get(step_key)
                if task_id not in self.holders and named and named[1] >= self.submitted.get(task_id, 0.0):
                    self.holders[task_id] = named[0]
        for host in answered:
            self.silent_since.pop(host, None)
        for host in (self.workers | {self.holders.get(t) for t in ids}) - answered - {None}:
            self.silent_since.setdefault(host, now)
        self.workers = answered

    def _none_answers(self, in_flight: dict[str, str], broker_down: bool, limit: str, now: float) -> tuple[dict[str, str], list[str], str | None]:
        """The verdict when no worker answered: a notice once, the run's failure after the timeout."""
        ids = list(in_flight.values())
        steps = ", ".join(sorted(in_flight))
        self.none_since = self.none_since if self.none_since is not None else now
        waited = now - self.none_since
        failing = bool(self.timeout) and waited >= self.timeout
        notices = []
        if (waited >= NOTICE_SECONDS or failing) and "none" not in self.noticed:  # said before it fails
            self.noticed.add("none")
            cause = f"the Celery broker {self.broker} cannot be reached" if broker_down else f"no Celery worker answers on {self.broker}"
            notices.append(f"{cause} while steps wait ({steps}): waiting {limit}")
        if not failing:
            return {}, notices, None
        gone = sorted({h for t in ids if (h := self.holders.get(t))})
        cause = f"the Celery broker {self.broker} could not be reached" if broker_down else f"no Celery worker answered on {self.broker}"
        return (
            {},
            notices,
            (
                f"{cause} within {self.timeout:.0f} s (--celery-worker-timeout) while steps waited: {steps}"
                + (f" (taken by {', '.join(gone)}, now gone)" if gone else "")
                + "; start a worker (`dagster-celery worker start -A dagster_celery.app -y <celery.yaml>`, "
                "docs/operations.md#running-on-a-cluster), then run the same command again: it redoes only "
                "what did not land"
            ),
        )

    def _lost_steps(self, in_flight: dict[str, str], replies: dict, limit: str, now: float) -> tuple[dict[str, str], list[str]]:
        """The steps whose worker is gone or lost the task (step key -> why) and the notices to say once."""
        answered = set(replies)
        lost, notices = {}, []
        for step_key, task_id in in_flight.items():
            host = self.holders.get(task_id)
            if host is None:
                continue
            if host in answered:  # a worker restarted under the same name answers, but lost the task
                if task_id in (replies.get(host) or {}):
                    self.orphan_since.pop(task_id, None)
                    continue
                orphan = now - self.orphan_since.setdefault(task_id, now)
                if self.timeout and orphan >= self.timeout:
                    lost[step_key] = (
                        f"its Celery worker {host} answers but has not held it for {self.timeout:.0f} s "
                        "(--celery-worker-timeout), and no result came: restarted"
                    )
                continue
            silent = now - self.silent_since[host]
            failing = bool(self.timeout) and silent >= self.timeout
            if (silent >= NOTICE_SECONDS or failing) and host not in self.noticed:  # said before it fails
                self.noticed.add(host)
                notices.append(f"the Celery worker {host} running step {step_key} does not answer: waiting {limit}")
            if failing:
                lost[step_key] = (
                    f"its Celery worker {host} has not answered within {self.timeout:.0f} s (--celery-worker-timeout): killed, or its machine lost"
                )
        return lost, notices


class _WatchThread(threading.Thread):
    """Runs a :class:`WorkerWatch` every :data:`WATCH_SECONDS` beside the submission loop, so a
    check that waits for a silent worker's reply never delays a step's downstream. The loop sets
    :attr:`waiting` (step key -> task id of the tasks in flight) and collects the non-empty
    verdicts of :meth:`WorkerWatch.check` with :meth:`verdicts`."""

    def __init__(self, watch: WorkerWatch):
        super().__init__(name="dora-celery-worker-watch", daemon=True)
        self.watch, self.waiting = watch, {}
        self._done, self._lock, self._verdicts = threading.Event(), threading.Lock(), []

    def run(self) -> None:
        while not self._done.wait(WATCH_SECONDS):
            waiting = dict(self.waiting)
            if not waiting:
                self.watch.none_since = None  # nothing waited meanwhile
                continue
            verdict = self.watch.check(waiting)
            if verdict != ({}, [], None):
                with self._lock:
                    self._verdicts.append(verdict)

    def verdicts(self) -> list[tuple[dict[str, str], list[str], str | None]]:
        with self._lock:
            out, self._verdicts = self._verdicts, []
        return out

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=2 * REPLY_SECONDS + 1)
        self.watch.app.close()


def _worker_names(instance, run_id: str):
    """``records(cursor)`` for :class:`WorkerWatch`: the (step key, worker hostname, time) of
    the run's engine events that name the Celery worker running a step."""
    from dagster._core.events import DagsterEventType

    def records(cursor):
        found = []
        while True:
            page = instance.get_records_for_run(run_id, cursor=cursor, of_type=DagsterEventType.ENGINE_EVENT, limit=500)
            cursor = page.cursor
            for record in page.records:
                event = record.event_log_entry.dagster_event
                metadata = getattr(getattr(event, "event_specific_data", None), "metadata", None) or {}
                host = metadata.get(WORKER_METADATA_KEY)
                if event is not None and event.step_key and host is not None:
                    found.append((event.step_key, str(getattr(host, "value", host)), record.event_log_entry.timestamp))
            if not page.has_more:
                return found, cursor

    return records


def _lost_error(why: str):
    """The ``SerializableErrorInfo`` of a step whose worker is gone (a :class:`CeleryWorkerError`)."""
    from ingestion.errors import CeleryWorkerError

    try:
        raise CeleryWorkerError(why)
    except CeleryWorkerError:
        return serializable_error_info_from_exc_info(sys.exc_info())


def _interrupt(job_context, active_execution, step_results):
    """On SIGINT / SIGTERM: say so, mark the plan interrupted and revoke every task in flight.
    A generator of engine events; returns (``yield from``) whether the run was interrupted."""
    if not active_execution.check_for_interrupts():
        return False
    yield DagsterEvent.engine_event(
        job_context,
        "Celery executor: received termination signal - revoking active tasks from workers",
        EngineEventData.interrupted(list(step_results.keys())),
    )
    active_execution.mark_interrupted()
    for result in step_results.values():
        result.revoke()
    return True


def _ready_results(job_context, active_execution, step_results, step_errors, priority_for_key):
    """Yield the events of every task whose result is ready (a revoked task's end, a task that
    failed outside its step recorded in ``step_errors``) and forget those tasks."""
    from celery.exceptions import TaskRevokedError

    done = []
    for step_key, result in sorted(step_results.items(), key=lambda item: priority_for_key(item[0])):
        if not result.ready():
            continue
        try:
            step_events = result.get()
        except TaskRevokedError:
            step_events = []
            yield DagsterEvent.engine_event(
                job_context.for_step(active_execution.get_step_by_key(step_key)),
                f'celery task for running step "{step_key}" was revoked.',
                EngineEventData(marker_end=DELEGATE_MARKER),
            )
        except Exception:
            step_events = []
            step_errors[step_key] = serializable_error_info_from_exc_info(sys.exc_info())
        for step_event in step_events:
            event = deserialize_value(step_event, DagsterEvent)
            yield event
            active_execution.handle_event(event)
        done.append(step_key)
    for step_key in done:
        del step_results[step_key]
        # a step whose task ended without its success or failure event is in an unknown
        # state: Dagster abandons its downstream, and the plan can still complete
        active_execution.verify_complete(job_context, step_key)


def _lost_results(job_context, active_execution, watcher, step_results, step_errors):
    """Act on the watch's verdicts: say its notices, fail the run when no worker answered for
    the timeout (raises ``CeleryWorkerError`` after revoking every task), fail each lost step."""
    for lost, notices, failure in watcher.verdicts():
        for line in notices:
            print(f"dora: {line}", file=sys.stderr, flush=True)
            yield DagsterEvent.engine_event(job_context, line, EngineEventData())
        if failure:
            from ingestion.errors import CeleryWorkerError

            for result in step_results.values():
                result.revoke()  # a worker started later must not run a failed run's steps
            raise CeleryWorkerError(failure)
        for step_key, why in lost.items():
            if step_key not in step_results or step_results[step_key].ready():
                continue  # its result came after all: handled as any other
            step_results.pop(step_key).revoke()
            step_errors[step_key] = _lost_error(why)
            yield DagsterEvent.engine_event(
                job_context.for_step(active_execution.get_step_by_key(step_key)),
                f'celery task for step "{step_key}" was lost: {why}',
                EngineEventData(marker_end=DELEGATE_MARKER),
            )
            active_execution.verify_complete(job_context, step_key)  # its downstream is abandoned


def _submit_ready(job_context, active_execution, app, step_execution_fn, watcher, step_results, task_default_queue, task_default_priority):
    """Submit every step ready to run as a Celery task on its queue (raises when the broker
    cannot be reached: the run fails, saying so)."""
    for step in active_execution.get_steps_to_execute():
        queue = step.tags.get(DAGSTER_CELERY_QUEUE_TAG, task_default_queue)
        yield DagsterEvent.engine_event(
            job_context.for_step(step),
            f'Submitting celery task for step "{step.key}" to queue "{queue}".',
            EngineEventData(marker_start=DELEGATE_MARKER),
        )
        try:
            step_results[step.key] = step_execution_fn(
                app,
                job_context,
                step,
                queue,
                _get_step_priority(job_context, step, task_default_priority),
                active_execution.get_known_state(),
            )
            watcher.watch.submitted[step_results[step.key].id] = time.time()
        except Exception:  # the broker cannot be reached: the run fails, saying so
            yield DagsterEvent.engine_event(
                job_context,
                "Encountered error during celery task submission.",
                event_specific_data=EngineEventData.engine_error(serializable_error_info_from_exc_info(sys.exc_info())),
            )
            raise


def celery_execution_loop(job_context, execution_plan, step_execution_fn):
    """Submit each ready step as a Celery task and yield the events the tasks return, until
    every step of ``execution_plan`` has an end (succeeded, failed, skipped or abandoned).

    ``dagster_celery.core_execution_loop.core_celery_execution_loop`` with two changes: a task
    that fails outside its step does not stop the submission of the steps that do not depend on
    it, and the workers holding the tasks in flight are watched (:class:`WorkerWatch`; the module
    docstring says why). Only an interrupt (SIGINT / SIGTERM) stops submission, and then the
    tasks in flight are revoked.

    Yields:
        ``DagsterEvent``: the engine's events and each step's own events.

    Raises:
        DagsterSubprocessError: a task failed outside its step, or its worker was lost (one
            error per step, in the message and in ``subprocess_error_infos``), once every other
            step has an end.
        ingestion.errors.CeleryWorkerError: no worker answered for the executor's
            ``worker_timeout`` while steps waited (their tasks are revoked first).
    """
    executor = job_context.executor
    if execution_plan.step_keys_to_execute and not execution_plan.artifacts_persisted:
        raise DagsterInvariantViolationError(
            "Cannot use in-memory storage with Celery, use filesystem (on top of NFS or similar system that "
            "allows files to be available to all nodes), S3, or GCS"
        )
    app = make_app(executor.app_args())
    task_default_priority = app.conf.task_default_priority
    task_default_queue = app.conf.task_default_queue

    def priority_for_step(step):
        return -1 * int(step.tags.get(DAGSTER_CELERY_STEP_PRIORITY_TAG, task_default_priority)) + -1 * _get_run_priority(job_context)

    def priority_for_key(step_key):
        return priority_for_step(execution_plan.get_step_by_key(step_key))

    _warn_on_priority_misuse(job_context, execution_plan)
    # the watch's own app (its own broker connection): it runs in a thread beside this loop
    watcher = _WatchThread(
        WorkerWatch(
            make_app(executor.app_args()), executor.shown_broker, executor.worker_timeout, _worker_names(job_context.instance, job_context.run_id)
        )
    )
    step_results = {}  # step key -> celery AsyncResult
    step_errors = {}
    watcher.start()
    try:
        with (
            InstanceConcurrencyContext(job_context.instance, job_context.dagster_run) as concurrency,
            execution_plan.start(
                retry_mode=executor.retries, sort_key_fn=priority_for_step, instance_concurrency_context=concurrency
            ) as active_execution,
        ):
            stopping = False
            while (not active_execution.is_complete and not stopping) or step_results:
                if (yield from _interrupt(job_context, active_execution, step_results)):
                    stopping = True
                yield from _ready_results(job_context, active_execution, step_results, step_errors, priority_for_key)
                # a task whose worker is gone never gives a result: the watch says so, then fails it
                watcher.waiting = {} if stopping else {key: result.id for key, result in step_results.items()}
                yield from _lost_results(job_context, active_execution, watcher, step_results, step_errors)

                yield from active_execution.plan_events_iterator(job_context)  # skips and abandons

                if not stopping:  # the one change: a failed task does not stop independent steps
                    yield from _submit_ready(
                        job_context, active_execution, app, step_execution_fn, watcher, step_results, task_default_queue, task_default_priority
                    )
                time.sleep(TICK_SECONDS)

            if step_errors:
                raise DagsterSubprocessError(
                    "During celery execution errors occurred in workers:\n"
                    + "\n".join(f"[{key}]: {err.to_string()}" for key, err in step_errors.items()),
                    subprocess_error_infos=list(step_errors.values()),
                )
    finally:
        watcher.stop()

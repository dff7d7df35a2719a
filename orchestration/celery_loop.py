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

Imported only when the ``celery`` executor is chosen (``dagster-celery`` is the ``cluster`` extra).
"""

from __future__ import annotations

import sys
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


class DoraCeleryExecutor(CeleryExecutor):
    """``dagster_celery``'s executor (same config, same workers) running :func:`celery_execution_loop`."""

    def execute(self, plan_context, execution_plan):
        return celery_execution_loop(plan_context, execution_plan, step_execution_fn=_submit_task)


def celery_execution_loop(job_context, execution_plan, step_execution_fn):
    """Submit each ready step as a Celery task and yield the events the tasks return, until
    every step of ``execution_plan`` has an end (succeeded, failed, skipped or abandoned).

    ``dagster_celery.core_execution_loop.core_celery_execution_loop`` with one change: a task
    that fails outside its step does not stop the submission of the steps that do not depend on
    it (the module docstring says why). Only an interrupt (SIGINT / SIGTERM) stops submission,
    and then the tasks in flight are revoked.

    Yields:
        ``DagsterEvent``: the engine's events and each step's own events.

    Raises:
        DagsterSubprocessError: a task failed outside its step (one error per step, in the
            message and in ``subprocess_error_infos``), once every other step has an end.
    """
    from celery.exceptions import TaskRevokedError

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
    step_results = {}  # step key -> celery AsyncResult
    step_errors = {}

    with InstanceConcurrencyContext(job_context.instance, job_context.dagster_run) as concurrency, \
            execution_plan.start(retry_mode=executor.retries, sort_key_fn=priority_for_step,
                                 instance_concurrency_context=concurrency) as active_execution:
        stopping = False
        while (not active_execution.is_complete and not stopping) or step_results:
            if active_execution.check_for_interrupts():
                yield DagsterEvent.engine_event(
                    job_context, "Celery executor: received termination signal - revoking active tasks from workers",
                    EngineEventData.interrupted(list(step_results.keys())),
                )
                stopping = True
                active_execution.mark_interrupted()
                for result in step_results.values():
                    result.revoke()

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

            yield from active_execution.plan_events_iterator(job_context)  # skips and abandons

            if not stopping:  # the one change: a failed task does not stop independent steps
                for step in active_execution.get_steps_to_execute():
                    queue = step.tags.get(DAGSTER_CELERY_QUEUE_TAG, task_default_queue)
                    yield DagsterEvent.engine_event(
                        job_context.for_step(step),
                        f'Submitting celery task for step "{step.key}" to queue "{queue}".',
                        EngineEventData(marker_start=DELEGATE_MARKER),
                    )
                    try:
                        step_results[step.key] = step_execution_fn(
                            app, job_context, step, queue, _get_step_priority(job_context, step, task_default_priority),
                            active_execution.get_known_state(),
                        )
                    except Exception:  # the broker cannot be reached: the run fails, saying so
                        yield DagsterEvent.engine_event(
                            job_context, "Encountered error during celery task submission.",
                            event_specific_data=EngineEventData.engine_error(
                                serializable_error_info_from_exc_info(sys.exc_info())),
                        )
                        raise
            time.sleep(TICK_SECONDS)

        if step_errors:
            raise DagsterSubprocessError(
                "During celery execution errors occurred in workers:\n"
                + "\n".join(f"[{key}]: {err.to_string()}" for key, err in step_errors.items()),
                subprocess_error_infos=list(step_errors.values()),
            )

"""Tiny Dagster jobs for the executors' own tests, importable by Celery workers and step processes
(``reconstructable``), run on :data:`orchestration.cluster.dora_executor` as the audit job is:
``worker_lost_job``, one step whose worker process dies mid-step, one independent slow step and
a step after each; ``worker_gone_job``, one step that kills its whole worker (on the queue
:data:`DOOMED_QUEUE`) and a step after it; ``two_steps_job``, two quick steps."""

from __future__ import annotations

import os
import signal
import time

import dagster as dg

from orchestration.cluster import dora_executor

#: How long the independent step takes (s): the lost step's worker dies well before it ends, so
#: the step after it becomes ready only after the loss.
SLOW_SECONDS = 6.0


@dg.op
def dies() -> int:
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)  # as a worker killed by the OOM killer or by hand
    return 1


@dg.op
def after_dies(value: int) -> int:
    return value


@dg.op
def slow() -> int:
    time.sleep(SLOW_SECONDS)
    return 2


@dg.op
def after_slow(value: int) -> int:
    return value + 1


@dg.job(executor_def=dora_executor)
def worker_lost_job():
    after_dies(dies())
    after_slow(slow())


#: The queue of the step that kills its whole worker: only the worker started for it listens there,
#: so the other workers of a test cluster are never the ones killed.
DOOMED_QUEUE = "doomed"


@dg.op(tags={"dagster-celery/queue": DOOMED_QUEUE})
def kills_its_worker() -> int:
    # the worker's main process (this pool process's parent), then this one: the task is
    # acknowledged and nobody is left to answer for it, as when a machine is lost
    os.kill(os.getppid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
    return 1


@dg.op
def after_gone(value: int) -> int:
    return value


@dg.job(executor_def=dora_executor)
def worker_gone_job():
    after_gone(kills_its_worker())


@dg.op
def first() -> int:
    return 1


@dg.op
def second(value: int) -> int:
    return value + 1


@dg.job(executor_def=dora_executor)
def two_steps_job():
    second(first())

"""A tiny Dagster job for the Celery executor's own tests, importable by the workers
(``reconstructable``): one step whose worker process dies mid-step, one independent slow step
and a step after each. Run on :data:`orchestration.cluster.dora_executor`, as the audit job is."""

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

"""``dora audit``: run the audit job (every asset) in this process, under Dagster's
multiprocess executor or on Celery workers (``orchestration/cluster.py``), against the Dagster instance in ``$DAGSTER_HOME`` (default
``$DORA_HOME/dagster``), so every run shows up in ``dora ui``; then print the summary.
"""

from __future__ import annotations

import contextlib
import os
import sys

import dagster as dg

from orchestration.cli.flags import audit_run_config
from orchestration.instance import AUDIT_JOB, prepare_environment, prepare_run_readers


def _probe_selection(defs, probes: list[str] | None):
    """Asset keys of the chosen probe families (``--family``: their Dagster groups) and of the
    shared assets they feed, or None (every asset) when not given.

    A shared asset (group ``audits``) is selected when all its parents are (a shared model
    built only from what every family lands); the audit log ``landing/audits`` when any of them is (it records the
    audits of whichever families ran)."""
    if not probes:
        return None
    import graphlib

    from orchestration import families as fam
    from orchestration.defs.audits.assets import AUDIT_LOG_KEY, AUDITS_GROUP

    graph = defs.resolve_asset_graph()
    groups = [g for name in probes for g in fam.get_family(name).groups]
    selected = set(dg.AssetSelection.groups(*groups).resolve(graph))
    shared = {k: set(graph.get(k).parent_keys) for k in dg.AssetSelection.groups(AUDITS_GROUP).resolve(graph)}
    for key in graphlib.TopologicalSorter({k: p & set(shared) for k, p in shared.items()}).static_order():
        parents = shared[key]
        if (parents & selected) if key == AUDIT_LOG_KEY else (parents and parents <= selected):
            selected.add(key)
    return sorted(selected)


@contextlib.contextmanager
def _execute(
    executor: str,
    job,
    run_config,
    instance,
    partition: str | None,
    tags: dict,
    selection=None,
    broker: str | None = None,
    worker_timeout: float | None = None,
):
    """Run the audit job in this process, under Dagster's multiprocess executor, or on Celery
    workers (``broker``: the Celery broker URL, :func:`orchestration.cluster.broker_url`;
    ``worker_timeout``: ``--celery-worker-timeout``, how long the run waits for a worker that
    does not answer, ``orchestration/celery_loop.py``).

    Yields:
        The run's result (``ExecuteInProcessResult`` or ``ExecuteJobResult``): both give
        ``success``, ``run_id``, ``all_events`` and ``get_asset_materialization_events()``.
    """
    if executor == "in_process":
        yield job.execute_in_process(
            run_config=run_config,
            instance=instance,
            raise_on_error=False,
            partition_key=partition,
            tags=tags,
            asset_selection=selection,
        )
        return
    from dagster import execute_job, reconstructable

    from orchestration.cluster import execution_config, quiet_celery_warnings
    from orchestration.definitions import audit_job_for_multiprocess

    if executor == "celery":
        quiet_celery_warnings()

    if partition:
        tags = {**tags, "dagster/partition": partition}
    # multiprocess: each step in a process forked from one that has imported dora; celery: each
    # step on a worker that listens on the broker (orchestration/cluster.py)
    run_config = dg.RunConfig(ops=run_config.ops, loggers=run_config.loggers, execution=execution_config(executor, broker, worker_timeout))
    # step processes write to file descriptor 1, not to the redirected sys.stdout: point it there too
    sys.stdout.flush()
    saved_stdout = os.dup(1)
    os.dup2(sys.stdout.fileno(), 1)
    try:
        with execute_job(
            # execute_job takes the run config as a mapping (execute_in_process also takes a RunConfig)
            reconstructable(audit_job_for_multiprocess),
            instance=instance,
            run_config=run_config.to_config_dict(),
            tags=tags,
            raise_on_error=False,
            asset_selection=selection,
        ) as result:
            yield result
    finally:
        sys.stdout.flush()
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)


def _interrupted_steps(result) -> list[str]:
    """The steps of a failed run that failed because the run was interrupted (Dagster raises
    ``DagsterExecutionInterruptedError`` in a step on SIGINT / SIGTERM), in event order."""
    steps = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data:
            error = event.step_failure_data.error
            while error is not None:
                if error.cls_name in ("DagsterExecutionInterruptedError", "KeyboardInterrupt"):
                    steps.append(event.step_key)
                    break
                error = error.cause or getattr(error, "context", None)
    return steps


def user_error_message(error) -> str | None:
    """The message of the first :class:`~ingestion.errors.DoraError` in a Dagster
    ``SerializableErrorInfo`` chain (the step's error, its causes and contexts), or ``None``."""
    names = _dora_error_names()
    for _ in range(10):
        if error is None:
            return None
        if error.cls_name in names:
            message = error.message.strip()
            head, sep, rest = message.partition(": ")
            if sep and head.split(".")[-1] == error.cls_name:  # "pkg.module.Error: text" -> "text"
                message = rest
            return message
        error = error.cause or getattr(error, "context", None)
    return None


def _failures(result) -> list[tuple[str, object]]:
    """(step key, ``SerializableErrorInfo``) of every failed step of a run, in event order; a run
    that failed before any step (its RUN_FAILURE event's error) as step ``"run"``."""
    steps = [
        (e.step_key, e.step_failure_data.error)
        for e in result.all_events
        if e.is_step_failure and e.step_failure_data and e.step_failure_data.error is not None
    ]
    if steps:
        return steps
    for event in result.all_events:
        error = getattr(getattr(event, "event_specific_data", None), "error", None)
        if event.is_run_failure and error is not None:
            return [("run", error)]
    return []


def _root_cause(error) -> str:
    """``"<ExceptionClass>: <first line>"`` of the deepest non-Dagster error of a chain (the
    user code's exception under Dagster's ``DagsterExecutionStepExecutionError`` wrapper)."""
    found = error
    for _ in range(10):
        if error is None:
            break
        if not error.cls_name.startswith("Dagster"):
            found = error
        error = error.cause or getattr(error, "context", None)
    first = (found.message.strip().splitlines() or [found.cls_name])[0]
    return first if first.startswith(found.cls_name) else f"{found.cls_name}: {first}"


def _worker_failures(error) -> list[tuple[str, str]]:
    """(step key, ``"<ExceptionClass>: <message>"``) of each step that died in a worker process
    (a Celery worker or a multiprocess child: Dagster lists them as ``[<step>]: <error>`` lines
    of one ``DagsterSubprocessError``; e.g. billiard's ``WorkerLostError`` after a SIGKILL)."""
    import re

    if error is None or error.cls_name != "DagsterSubprocessError":
        return []
    found = []
    for line in error.message.splitlines()[1:]:
        match = re.match(r"^\[(.+?)\]: (?:[\w.]+\.)?(\w+(?:Error|Exception|Exit)\b.*)$", line.strip())
        if match:
            found.append((match.group(1), match.group(2).strip()))
    return found


def failure_lines(result, log_dir, output_log) -> list[str]:
    """What ``dora audit`` prints for a failed run: one line per distinct failure, then where the
    stack traces are. The traces go to ``<log_dir>/audit-<run id>.log`` (written here), never to
    the terminal.

    A failure with a known cause (a :class:`~ingestion.errors.DoraError` anywhere in the step's
    error chain: a bad input file, an unreachable server, a model that cannot load) is
    ``dora audit: error: <its message>``; any other is ``dora audit: error: step <key> failed
    unexpectedly (<ExceptionClass>: <first line>); full trace: <log>``. At most
    :data:`MAX_FAILURE_LINES` failure lines (others are counted on the last line).

    Args:
        result: the Dagster run result (``success`` False). log_dir: ``$DORA_HOME/logs``.
        output_log: the file that holds the run's captured output (dbt's events), named in the log.

    Returns:
        The lines to print on stderr (their last one names the log file).
    """
    from pathlib import Path

    failures = _failures(result)
    log = Path(log_dir) / f"audit-{result.run_id}.log"
    with open(log, "w", encoding="utf-8") as fh:
        fh.write(f"dora audit: Dagster run {result.run_id} failed; captured output (dbt): {output_log}\n")
        for key, error in failures:
            fh.write(f"\n===== step {key} failed =====\n{error.to_string()}\n")
    lines: list[str] = []
    for key, error in failures:
        known = user_error_message(error)
        lost = _worker_failures(error)
        if known:
            found = [f"dora audit: error: {known}"]
        elif lost:
            found = [
                f"dora audit: error: step {step} failed in its worker process ({cause}); the same command "
                f"again redoes only what did not land; full trace: {log}"
                for step, cause in lost
            ]
        else:
            found = [f"dora audit: error: step {key} failed unexpectedly ({_root_cause(error)}); full trace: {log}"]
        lines += [line for line in found if line not in lines]
    more = len(lines) - MAX_FAILURE_LINES
    lines = lines[:MAX_FAILURE_LINES]
    if not lines:
        lines.append(f"dora audit: error: the Dagster run failed with no step error recorded; see {log}")
    lines.append(f"dora: audit failed (Dagster run {result.run_id}{f'; {more} more failed steps' if more > 0 else ''}); stack traces: {log}")
    return lines


#: Failure lines ``dora audit`` prints at most (one per distinct failed step; the rest are counted).
MAX_FAILURE_LINES = 2


def _dora_error_names() -> set[str]:
    import ingestion.errors  # every shared DoraError subclass lives there (tests/test_layering.py checks it)
    from orchestration.families import FAMILIES

    # a family's own errors (ProbeFamily.errors) are subclasses too once its record is imported;
    # named here as well, so a failure raised in a step process is known in this one
    names, todo = {e.__name__ for f in FAMILIES for e in f.errors}, [ingestion.errors.DoraError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def cmd_dry_run(args) -> int:
    """``dora audit --dry-run``: every selected family's plan, no model loaded, no Dagster run;
    with ``--target``, the plans of the target's families on its model, settings and options
    (``orchestration/cli/target.py``), after the checks a real run of it gets."""
    from orchestration.cli.flags import op_run_configs

    if getattr(args, "target", None):  # the target's families only, with its model and options
        from ingestion.errors import DoraError
        from orchestration.cli.target import dry_run_text, one_line

        try:
            text = dry_run_text(args)
        except DoraError as exc:
            print(f"dora audit: error: {one_line(exc)}", file=sys.stderr)
            return 2
        print(text)
        return 0
    try:
        ops = op_run_configs(args)
        plans = [f.plan(ops) for f in args.families if f.plan is not None]
        # the whole audit's time: every step of every selected family (orchestration/estimates.py)
        from orchestration.estimates import estimate_text

        plans.append(estimate_text(args.families, ops))
        if getattr(args, "api_batch", False):  # files, requests and prompt tokens per step (orchestration/cli/batch.py)
            from orchestration.cli.batch import batch_plan_text

            plans.append(batch_plan_text(ops))
    except ValueError as exc:
        print(f"dora audit: {exc}", file=sys.stderr)
        return 2
    print("\n\n".join(p for p in plans if p))
    return 0


def _wait_for_celery_worker(args) -> int:
    """0 once a Celery worker answers on the broker, else the exit code after one line: a broker
    URL of ``$DORA_CELERY_BROKER`` that is no broker (2), a broker that cannot be reached or no
    worker within ``--celery-worker-timeout`` (1), Ctrl-C / SIGTERM while waiting (130).

    Dagster's Celery executor, given no worker, queues the first step and waits for ever without
    a word, and a closed port costs ~40 s of kombu retries ending in an error that names no
    broker: checked here, before a run is created.
    """
    import signal

    from orchestration.cluster import BrokerError, broker_problem, broker_url, wait_for_worker

    url = broker_url(getattr(args, "celery_broker", None))
    problem = broker_problem(url)  # the flag was checked by argparse; the environment variable is checked here
    if problem:
        print(f"dora audit: error: --celery-broker / $DORA_CELERY_BROKER: {problem}", file=sys.stderr)
        return 2

    def stop(signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)  # nothing runs yet: SIGTERM ends the wait like Ctrl-C
    try:
        wait_for_worker(url, getattr(args, "celery_worker_timeout", 120.0), lambda line: print(f"dora audit: {line}", file=sys.stderr, flush=True))
    except BrokerError as exc:
        print(f"dora audit: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dora audit: interrupted (Ctrl-C or SIGTERM) while waiting for a Celery worker; no Dagster run was started", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def cmd_audit(args) -> int:
    """``dora audit``: the audit job run in-process (or on Celery workers) against the instance of
    ``$DORA_HOME``, then each family's summary. Exit 0, 1 (a step failed), 2 (a refusal), 3 (a
    drift check collapsed) or 130 (interrupted)."""
    home = prepare_environment()
    if getattr(args, "dry_run", False):
        return cmd_dry_run(args)
    code = _executor_ready(args)
    if code:
        return code
    instance = _open_audit_instance(args)
    chosen = _audited(args, instance, home)
    if isinstance(chosen, int):
        return chosen
    partition, run, version, families = chosen
    _recover_warehouse(args)
    run_config, partition, tags = _run_config_and_tags(args, instance, run, version, families, partition)
    log_dir = home / "logs"
    log_dir.mkdir(exist_ok=True)
    log_path = log_dir / "last_audit_dbt.log"
    result = _run_audit_job(args, instance, run_config, partition, tags, log_path)
    if not result.success:
        return _failure_exit(result, log_dir, log_path)
    return _summaries(args, result, families)


def _executor_ready(args) -> int:
    """0 when the executor can run the audit; else the exit code (``--executor celery`` without
    dagster-celery: 2, after saying so; no Celery worker answering: see :func:`_wait_for_celery_worker`)."""
    if args.executor != "celery":
        return 0
    from orchestration.cluster import celery_available

    if not celery_available():
        print(
            "dora audit: --executor celery needs dagster-celery: pip install -e '.[cluster]' (docs/operations.md#running-on-a-cluster)",
            file=sys.stderr,
        )
        return 2
    return _wait_for_celery_worker(args)


def _open_audit_instance(args):
    """The Dagster instance of ``$DORA_HOME`` (with a note when Celery workers would share its SQLite storage)."""
    from orchestration.instance import open_instance

    instance = open_instance()  # (concurrency) locked first creation; a corrupt storage file is one line
    if args.executor == "celery" and type(instance.event_log_storage).__name__.startswith("Sqlite"):
        # SQLite takes one writer at a time: several worker processes writing events at once can
        # fail a step with "database is locked" (a known limit of Dagster's SQLite storage)
        print(
            "dora audit: note: Celery workers on the SQLite instance of $DAGSTER_HOME work on one machine, but "
            "several processes writing it at once can fail a step ('database is locked'); for a cluster put the "
            "instance on PostgreSQL (docs/operations.md#the-instance-on-postgresql)",
            file=sys.stderr,
        )
    return instance


def _audited(args, instance, home):
    """What the audit runs, said on stderr: (partition or None, the target's resolved run or None,
    the target's version or None, the family names), or exit 2 when a registry target's
    version cannot be read (one line)."""
    if not args.target:
        families = [f.name for f in args.families]
        if _audits_model(args):
            print(f"dora: auditing {args.model} ({args.backend}); DORA_HOME={home}", file=sys.stderr)
        else:
            print(f"dora: running probe families {', '.join(families)}; DORA_HOME={home}", file=sys.stderr)
        return None, None, None, families
    # a registry target: its current version's partition, its families and settings
    from ingestion.errors import DoraError, VersionError
    from orchestration.cli.target import one_line, target_run
    from orchestration.defs.audits.runs import add_target_partition

    try:  # checked before the instance was opened (orchestration/cli/__init__.py: main)
        run = getattr(args, "target_run", None) or target_run(args)[0]
        partition, version, source = add_target_partition(instance, run.target)
    except (DoraError, VersionError) as exc:
        print(f"dora audit: error: {one_line(exc)}", file=sys.stderr)
        return 2
    print(
        f"dora: auditing registry target {args.target} (partition {partition}; families {', '.join(run.family_names)}); DORA_HOME={home}",
        file=sys.stderr,
    )
    print(f"dora: version source: {source}", file=sys.stderr)
    return partition, run, version, run.family_names


def _recover_warehouse(args) -> None:
    """The landing zone is the source of truth: a corrupt warehouse is moved aside, a deleted one
    rebuilt, ``--rebuild`` recomputes every model (dbt ``--full-refresh``); one line each."""
    from ingestion.build_state import forget, recover_warehouse
    from orchestration.defs.dbt.assets import DBT_STEPS

    for notice in recover_warehouse(DBT_STEPS, rebuild=args.rebuild):
        print(f"dora: {notice}", file=sys.stderr)
    if args.rebuild:
        for step in ("crows_pairs", "descriptors"):
            forget(step)


def _run_config_and_tags(args, instance, run, version, families, partition):
    """(run config, partition, run tags): a registry target's (its settings over the flags'),
    an ad-hoc audit of ``--model`` (a partition ``adhoc:<model>@<version>`` of it), or the
    selected families' own models (no partition)."""
    from orchestration.defs.audits.runs import adhoc_run, adhoc_tags, target_tags

    run_config = audit_run_config(args)
    if run is not None:  # the target's run config and tags (orchestration/cli/target.py: target_run)
        run_config = dg.RunConfig(ops={**run_config.ops, **run.ops}, loggers=run_config.loggers)
        tags = target_tags(run.target, version, families, run.registry, trigger="cli")
    elif _audits_model(args):
        partition, tags = adhoc_run(instance, args.model, args.backend, families, trigger="cli")
    else:  # the selected families name their models with flags of their own (--modscan-model)
        tags = adhoc_tags(families, trigger="cli")
    return run_config, partition, tags


def _run_audit_job(args, instance, run_config, partition, tags, log_path):
    """Execute the audit job on the chosen executor and return its result; dbt's echo of every
    event goes to ``log_path`` (the terminal keeps the summary; ``--verbose``: stderr)."""
    from orchestration.definitions import defs
    from orchestration.instance import configure_instance
    from orchestration.run_reaper import DeadRunReaper, process_tags, reap_dead_runs

    job = defs.resolve_job_def(AUDIT_JOB)
    with open(log_path, "w") as log, contextlib.redirect_stdout(sys.stderr if args.verbose else log):
        configure_instance(instance)  # one DuckDB writer at a time (pool 'duckdb_writer' = 1 slot)
        prepare_run_readers()  # in-run readers wait for a writer
        reap_dead_runs(instance)  # free the slots of audits whose process was killed
        with (
            DeadRunReaper(instance),
            _execute(
                args.executor,
                job,
                run_config,
                instance,
                partition,
                {**tags, **process_tags()},
                _probe_selection(defs, args.family),
                getattr(args, "celery_broker", None),
                getattr(args, "celery_worker_timeout", None),
            ) as result,
        ):
            pass
    return result


def _failure_exit(result, log_dir, log_path) -> int:
    """A failed run: 130 when it was interrupted (one line), else 1 after one line per failure."""
    interrupted = _interrupted_steps(result)
    if interrupted:  # (concurrency) Ctrl-C / SIGTERM: one line, the run is marked failed, exit 130
        print(
            f"dora audit: interrupted (Ctrl-C or SIGTERM) during {', '.join(interrupted)}; the Dagster run "
            f"{result.run_id} is marked failed; every shard that landed is kept: run the same command again "
            "to generate only the missing rows",
            file=sys.stderr,
        )
        return 130
    for line in failure_lines(result, log_dir, log_path):
        print(line, file=sys.stderr)
    return 1


def _summaries(args, result, families) -> int:
    """Each audited family's summary, the quarantined inputs, the requests still in open batches,
    then the drift alarms (:func:`alarm_exit`: 0, or :data:`EXIT_COLLAPSE`)."""
    from orchestration import families as fam
    from orchestration.cli.batch import pending_lines  # (--api-batch) requests still in open batches

    ran = [f for f in fam.FAMILIES if f.name in families]
    for family in ran:
        if family.summary is not None:
            text = family.summary(result, args)
            if text:
                print(text)
    for line in quarantine_lines(result, ran):
        print(line)
    for line in pending_lines(result):
        print(line, file=sys.stderr)
    return alarm_exit(result, ran)


#: ``dora audit``'s exit status when a drift check of an audit it ran collapsed (docs/cli.md)
EXIT_COLLAPSE = 3


def alarm_exit(result, families) -> int:
    """Print one line per drift alarm (a collapse or a significant change) of the audits this run
    landed, after the summaries, and one line for the checks that could not be compared; the
    alarms not yet POSTed to the target's webhook are sent (once: ``orchestration/alarms.py``).

    Returns:
        :data:`EXIT_COLLAPSE` when a collapse fired, else 0."""
    from orchestration.defs.audits.assets import run_audit_ids
    from orchestration.defs.audits.checks import judge_families
    from orchestration.family import materializations

    ids = {a for m in materializations(result, "audits") for a in run_audit_ids(m)}
    if not ids:
        return 0
    try:
        results, failures = judge_families(families)
    except Exception as exc:  # noqa: BLE001 - the audit itself succeeded; say why its checks were not judged
        print(f"dora: drift checks not judged: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return 0
    ours = [r for r in results if r.audit_id in ids]
    for r in ours:
        if r.is_alarm:
            print(f"dora: alarm: {r.text}")
    unmatched = [f"{r.family} {r.check}" for r in ours if r.state == "not comparable"]
    if unmatched:
        print(f"dora: not comparable with the previous audit (no probe unit in common): {', '.join(unmatched)}")
    for line in failures:
        print(f"dora: {line}", file=sys.stderr)
    return EXIT_COLLAPSE if any(r.state == "collapse" for r in ours) else 0


def _audits_model(args) -> bool:
    """Whether an ad-hoc ``dora audit`` audits the ``--model`` model: a selected family reads the
    flag (the others name their models with flags of their own, ``--modscan-model``)."""

    return any(flag.flag == "--model" for f in args.families for flag in f.flags)


def quarantine_lines(result, families) -> list[str]:
    """One summary line per family whose assets set input rows aside in this run (the
    ``rows_quarantined`` / ``<input>_rows_quarantined`` metadata of its landing assets, summed),
    none when it is zero."""
    from orchestration.family import materializations

    lines = []
    for family in families:
        n = sum(
            int(value or 0)
            for table in family.landing_tables
            for md in materializations(result, table)
            for key, value in md.items()
            if key == "rows_quarantined" or key.endswith("_rows_quarantined")
        )
        if n:
            lines.append(
                f"{family.name}: rows_quarantined {n:,} (input rows not audited, each with its file, line and "
                "reason in $DORA_HOME/landing/input_quarantine)"
            )
    return lines

"""``dora audit``: run the audit job (every asset) in this process or under Dagster's
multiprocess executor, against the Dagster instance in ``$DAGSTER_HOME`` (default
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
    """Asset keys of the chosen probe families (``--probe``: their Dagster groups) and of the
    shared assets they feed, or None (every asset) when not given.

    A shared asset (group ``audits``) is selected when all its parents are (``dim_audits`` needs
    BiasDora's marts); the audit log ``landing/audits`` when any of them is (it records the
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
def _execute(executor: str, job, run_config, instance, partition: str | None, tags: dict, selection=None):
    """Run the audit job in this process, or under Dagster's multiprocess executor.

    Yields:
        The run's result (``ExecuteInProcessResult`` or ``ExecuteJobResult``): both give
        ``success``, ``run_id``, ``all_events`` and ``get_asset_materialization_events()``.
    """
    if executor == "in_process":
        yield job.execute_in_process(
            run_config=run_config, instance=instance, raise_on_error=False, partition_key=partition, tags=tags,
            asset_selection=selection,
        )
        return
    from dagster import execute_job, reconstructable

    from orchestration.definitions import audit_job_for_multiprocess

    if partition:
        tags = {**tags, "dagster/partition": partition}
    # forkserver with dora's definitions preloaded: each step process is forked from one that has
    # already imported Dagster, dbt and dora (~4 s of imports saved per step)
    start = {"forkserver": {"preload_modules": ["orchestration.definitions"]}}
    run_config = dg.RunConfig(
        ops=run_config.ops, loggers=run_config.loggers,
        execution={"config": {"multiprocess": {"max_concurrent": 2, "start_method": start}}},
    )
    # step processes write to file descriptor 1, not to the redirected sys.stdout: point it there too
    sys.stdout.flush()
    saved_stdout = os.dup(1)
    os.dup2(sys.stdout.fileno(), 1)
    try:
        with execute_job(
            # execute_job takes the run config as a mapping (execute_in_process also takes a RunConfig)
            reconstructable(audit_job_for_multiprocess), instance=instance, run_config=run_config.to_config_dict(), tags=tags,
            raise_on_error=False, asset_selection=selection,
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


def _dora_error_names() -> set[str]:
    import ingestion.errors  # every DoraError subclass lives there (tests/test_layering.py checks it)

    names, todo = set(), [ingestion.errors.DoraError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names
def cmd_dry_run(args) -> int:
    """``dora audit --dry-run``: every selected family's plan, no model loaded, no Dagster run."""
    from orchestration import families as fam
    from orchestration.cli.flags import op_run_configs, selected

    try:
        ops = op_run_configs(args)
        plans = [f.plan(ops) for f in fam.FAMILIES if f.plan is not None and selected(args, f)]
    except ValueError as exc:
        print(f"dora audit: {exc}", file=sys.stderr)
        return 2
    print("\n\n".join(p for p in plans if p))
    return 0


def cmd_audit(args) -> int:
    home = prepare_environment()
    if getattr(args, "dry_run", False):
        return cmd_dry_run(args)
    from orchestration.instance import open_instance

    instance = open_instance()  # (concurrency) locked first creation; a corrupt storage file is one line
    from orchestration.definitions import defs

    partition = None
    if args.target:  # a registry target: its current version's partition, settings from the registry
        from ingestion.errors import RegistryError, VersionError
        from orchestration.defs.audits.runs import add_target_partition

        try:
            partition, registry = add_target_partition(instance, args.target, args.registry)
        except (RegistryError, KeyError, VersionError) as exc:
            print(f"dora audit: {exc}", file=sys.stderr)
            return 2
        print(f"dora: auditing registry target {args.target} (partition {partition}); DORA_HOME={home}", file=sys.stderr)
    elif args.probe and "biasdora" not in args.probe:
        print(f"dora: running probe families {', '.join(dict.fromkeys(args.probe))}; DORA_HOME={home}", file=sys.stderr)
    else:
        print(f"dora: auditing {args.model} ({args.backend}); DORA_HOME={home}", file=sys.stderr)
    from ingestion.build_state import forget, recover_warehouse
    from orchestration.defs.dbt.assets import DBT_STEPS

    # the landing zone is the source of truth: a corrupt warehouse is moved aside, a deleted one
    # rebuilt, --rebuild recomputes every model (dbt --full-refresh); one line each
    for notice in recover_warehouse(DBT_STEPS, rebuild=args.rebuild):
        print(f"dora: {notice}", file=sys.stderr)
    if args.rebuild:
        for step in ("crows_pairs", "descriptors"):
            forget(step)
    run_config = audit_run_config(args, **({"registry": registry} if args.target else {}))
    from orchestration.cli.flags import selected
    from orchestration.defs.audits.runs import adhoc_run, adhoc_tags, target_run_tags
    from orchestration import families as fam

    families = [f.name for f in fam.FAMILIES if selected(args, f)]
    if args.target:
        tags = target_run_tags(partition, registry, families, trigger="cli")
    elif any(flag.flag == "--model" for f in fam.FAMILIES if selected(args, f) for flag in f.flags):
        # an ad-hoc audit of the --model model is a partition of it: `adhoc:<model>@<version>`
        partition, tags = adhoc_run(instance, args.model, args.backend, families, trigger="cli")
    else:  # the selected families name their models with flags of their own (--modscan-model)
        tags = adhoc_tags(families, trigger="cli")
    job = defs.resolve_job_def(AUDIT_JOB)
    log_dir = home / "logs"
    log_dir.mkdir(exist_ok=True)
    log_path = log_dir / "last_audit_dbt.log"
    # dagster-dbt echoes every dbt event to stdout; keep the terminal for the summary.
    with open(log_path, "w") as log, contextlib.redirect_stdout(sys.stderr if args.verbose else log):
        from orchestration.instance import DeadRunReaper, configure_instance, process_tags, reap_dead_runs

        configure_instance(instance)  # one DuckDB writer at a time (pool 'duckdb_writer' = 1 slot)
        prepare_run_readers()  # in-run readers wait for a writer
        reap_dead_runs(instance)  # free the slots of audits whose process was killed
        with DeadRunReaper(instance), _execute(args.executor, job, run_config, instance, partition, {**tags, **process_tags()},
                                                   _probe_selection(defs, args.probe)) as result:
            pass
    if not result.success:
        interrupted = _interrupted_steps(result)
        if interrupted:  # (concurrency) Ctrl-C / SIGTERM: one line, the run is marked failed, exit 130
            print(f"dora audit: interrupted (Ctrl-C or SIGTERM) during {', '.join(interrupted)}; the Dagster run "
                  f"{result.run_id} is marked failed; every shard that landed is kept: run the same command again "
                  "to generate only the missing rows", file=sys.stderr)
            return 130
        for event in result.all_events:
            if event.is_step_failure and event.step_failure_data:  # (a RUN_FAILURE has no step data)
                error = event.step_failure_data.error
                known = user_error_message(error)  # a DoraError: its one line, no traceback
                if known:
                    print(f"dora audit: {known}", file=sys.stderr)
                else:
                    print(f"dora: step {event.step_key} failed:\n{error.to_string()}", file=sys.stderr)
        print(f"dora: audit failed (Dagster run {result.run_id}); dbt log: {log_path}; run logs: `dora ui`", file=sys.stderr)
        return 1
    for family in fam.FAMILIES:
        if family.summary is not None and selected(args, family):
            text = family.summary(result, args)
            if text:
                print(text)
    return 0

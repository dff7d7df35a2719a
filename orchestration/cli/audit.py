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

def _vision_report(result) -> str:
    """One line per vision probe of a finished audit run: what ran, or why it was skipped."""
    lines = []
    names = {"t2i_images": "T2I", "i2t_descriptions": "I2T"}
    for mat in result.get_asset_materialization_events():
        key = mat.materialization.asset_key.path
        if len(key) != 2 or key[0] != "landing" or key[1] not in names:
            continue
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("status") == "skipped":
            lines.append(f"dora: {names[key[1]]} probe skipped: {md.get('reason')}; {md.get('how_to_enable')}")
        else:
            lines.append(
                f"dora: {names[key[1]]} audit {md.get('audit_id')}: {md.get('rows_generated')} generated, "
                f"{md.get('rows_already_landed')} already landed"
            )
            if key[1] == "i2t_descriptions":
                lines.append(
                    f"  dora query \"select modality, setting, descriptor, word, tfidf, fisher_q from fct_associations "
                    f"where audit_id = '{md.get('audit_id')}' and is_significant order by fisher_q limit 20\""
                )
    return "\n".join(lines)


def _scoring_report(result) -> str:
    """One line per scoring asset of a finished audit run, and where the report is."""
    lines = []
    for mat in result.get_asset_materialization_events():
        key = mat.materialization.asset_key.path
        if len(key) != 2 or key[0] != "landing" or key[1] not in ("sentiment_scores", "toxicity_scores", "judge_ratings"):
            continue
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("skipped"):  # a registry target that does not list this scorer
            lines.append(f"  {key[1]}: skipped ({md['skipped']} {md.get('target_scorers')} of target {md.get('target')})")
            continue
        done = md.get("rows_scored", md.get("rows_judged", 0))
        who = md.get("scorer") or md.get("judge_model") or "-"
        extra = f", parse rate {md['parse_rate']:.1%}" if "parse_rate" in md and done else ""
        lines.append(f"  {key[1]}: {done} new rows ({who}), {md.get('associations_selected', 0)} associations selected{extra}")
    if lines:
        lines = ["scores (dora report writes the HTML report; dora query \"select * from agg_bias_by_dimension\"):", *lines]
    return "\n".join(lines)


def _probe_selection(defs, probes: list[str] | None):
    """Asset keys of the chosen probe families (``--probe``), or None (every asset) when not given."""
    if not probes:
        return None
    from orchestration.cli.parser import FAMILY_GROUPS

    graph = defs.resolve_asset_graph()
    family = {f: dg.AssetSelection.groups(g).resolve(graph) for f, g in FAMILY_GROUPS.items()}
    keys: set = set()
    for probe in probes:
        if probe == "biasdora":
            keys |= set(graph.get_all_asset_keys()) - set().union(*family.values())
        else:
            keys |= family[probe]
    return sorted(keys)


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
    import ingestion.errors
    import ingestion.registry  # noqa: F401 - registers their DoraError subclasses
    import models_inference.backends.text  # noqa: F401
    import models_inference.model_ref  # noqa: F401

    names, todo = set(), [ingestion.errors.DoraError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names
def cmd_dry_run(args) -> int:
    """``dora audit --dry-run``: the plan, no model loaded, no Dagster run."""
    from orchestration.cli.flags import config_values
    from orchestration.defs.config import AuditConfig, VisionConfig
    from orchestration.dry_run import format_plan, t2i_plan_lines, t2t_plan_lines

    values = config_values(args)
    try:
        lines, audit_id, rate, source = t2t_plan_lines(AuditConfig(**values.get(AuditConfig, {})), audit_id=args.audit_id)
        vision = VisionConfig(**values.get(VisionConfig, {}))
        if vision.t2i_model:  # T2I rows x images (landed images need the model's version: not counted)
            lines += t2i_plan_lines(vision.t2i_settings, vision.descriptors, vision.per_dimension,
                                    vision.images_per_descriptor)
    except ValueError as exc:
        print(f"dora audit: {exc}", file=sys.stderr)
        return 2
    print(format_plan(lines, audit_id, rate, source))
    return 0


def cmd_audit(args) -> int:
    home = prepare_environment()
    if getattr(args, "dry_run", False):
        return cmd_dry_run(args)
    from orchestration.instance import open_instance

    instance = open_instance()  # (concurrency) locked first creation; a corrupt storage file is one line
    from analytics.summary import audit_summary
    from orchestration.definitions import defs

    partition = None
    if args.target:  # a registry target: its current version's partition, settings from the registry
        from ingestion.registry import RegistryError
        from models_inference.model_ref import VersionError
        from orchestration.defs.audits.runs import add_target_partition

        try:
            partition, registry = add_target_partition(instance, args.target, args.registry)
        except (RegistryError, KeyError, VersionError) as exc:
            print(f"dora audit: {exc}", file=sys.stderr)
            return 2
        print(f"dora: auditing registry target {args.target} (partition {partition}); DORA_HOME={home}", file=sys.stderr)
    elif args.probe and "biasdora" not in args.probe:
        print(f"dora: running probe families {', '.join(args.probe)}; DORA_HOME={home}", file=sys.stderr)
    else:
        print(f"dora: auditing {args.model} ({args.backend}); DORA_HOME={home}", file=sys.stderr)
    if args.rebuild:
        from ingestion.build_state import forget
        from ingestion.landing import set_aside_corrupt_warehouse, warehouse_problem
        from orchestration.defs.dbt.assets import DBT_STEPS

        problem = warehouse_problem()
        aside = set_aside_corrupt_warehouse()
        if aside:  # the landing zone is the source of truth: the build below recreates it
            print(f"dora: the warehouse was corrupt ({problem}): moved to {aside}; rebuilding it from landing", file=sys.stderr)

        for step in ("crows_pairs", "descriptors", *DBT_STEPS):
            forget(step)
    run_config = audit_run_config(args, **({"registry": registry} if args.target else {}))
    from orchestration.defs.vlstereoset.config import OP_NAME, VLStereoSetConfig, run_config as vlstereoset_run_config

    run_config.ops[OP_NAME] = VLStereoSetConfig(**vlstereoset_run_config(args))  # probe family: VLStereoSet
    from orchestration.defs.modscan.config import audit_report as modscan_report, run_config as modscan_config

    run_config.ops["modscan_responses"] = modscan_config(args)  # probe family: ModSCAN
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
        with DeadRunReaper(instance), _execute(args.executor, job, run_config, instance, partition, process_tags(),
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
    audit_id = None
    for mat in result.get_asset_materialization_events():
        md = mat.materialization.metadata
        if "audit_id" in md and mat.materialization.asset_key.path[-1] == "t2t_completions":
            audit_id = md["audit_id"].value
    if not args.probe or "biasdora" in args.probe:
        print(audit_summary(audit_id, top=args.top, run_id=result.run_id))
        print(_scoring_report(result))
    if not args.probe or "counterfactual" in args.probe:  # probe family: counterfactual sets
        from orchestration.defs.counterfactual.config import audit_report as counterfactual_report

        print(counterfactual_report(result))
    if not args.probe or "modscan" in args.probe:  # probe family: ModSCAN
        print(modscan_report(result))
    if not args.probe or "vlstereoset" in args.probe:  # probe family: VLStereoSet
        from analytics.vlstereoset import vlstereoset_summary
        from orchestration.defs.vlstereoset.config import audit_ids_of_run

        if audit_ids_of_run(result):
            print(vlstereoset_summary(audit_ids_of_run(result)))
    vision = _vision_report(result)
    if vision:
        print(vision, file=sys.stderr)
    return 0

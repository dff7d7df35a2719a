"""``dora audit --target NAME``: the registry target checked like the flags it stands for, and its plan.

A target is families, a model and settings that the command line would give as flags, so it
gets the flags' checks, through the same functions, before the Dagster instance is opened:
its run config through the one translation every target run gets
(``orchestration/defs/audits/runs.py: target_ops``: each option through its flag's argparse
type, :func:`orchestration.options.family_options`; each family's own rules, e.g. BiasDora's
``probe`` settings through the flags of the fields they set), then, for each family the run
runs, its input paths (``Flag(path=)``) and local models (``Flag(local_model=)``), its ``check``
of the settings together, and its ``plan``, which refuses a plan over the row cap
(:class:`~ingestion.errors.PlanTooLargeError`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the Dagster-side module is imported when a target is resolved, not with the CLI
    from orchestration.defs.audits.runs import TargetRun


def _input_problem(run: TargetRun, dry_run: bool) -> str | None:
    """The first input path or local model of the target's run config that its flag would refuse."""
    from ingestion.vocabulary import DEFAULT_MODEL
    from orchestration.cli_validation import LOCAL_BACKENDS, local_model_problem, path_problem

    name = run.target.name
    for family in run.families:
        by_dest = {f.arg_dest: f for f in family.flags}
        for flag in family.flags:
            cls, field = flag.targets[0]
            op = next((op for op, c in family.configs.items() if c is cls), None)
            value = getattr(run.ops[op], field, None) if op in run.ops else None
            if not isinstance(value, str) or not value:
                continue
            if flag.path:
                problem = path_problem(value, flag.path, f"target {name!r}: {field}")
                if problem:
                    return problem
            if flag.local_model and not dry_run and value != DEFAULT_MODEL:
                backend_flag = by_dest.get(flag.local_model)
                backend = (
                    "transformers"
                    if flag.local_model == "always"
                    else (getattr(run.ops[op], backend_flag.field_name, None) if backend_flag is not None else None)
                )
                problem = local_model_problem(value, f"target {name!r}: {field}") if backend in LOCAL_BACKENDS else None
                if problem:
                    return problem
    return None


def target_run(args: argparse.Namespace, *, dry_run: bool = False, registry=None) -> tuple[TargetRun, str]:
    """The run of ``dora audit --target`` (``args.target``, ``args.registry``, ``args.family``),
    checked as its flags would be, and the plans its families print for ``--dry-run``. Loads no
    model, opens no Dagster instance, reads the registry file once (not at all when ``registry``,
    the parsed registry of ``args.registry``, is given).

    Returns:
        (the :class:`TargetRun`, the families' plan text: each family's plan when ``dry_run``, else
        those of the families that plan before a run, ``ProbeFamily.plan_before_run``, to refuse a
        plan over the row cap).

    Raises:
        RegistryError: the registry file is missing or invalid. UnknownTargetError: no such target
            (one line listing the registered ones). TargetConfigError: a family, option, probe
            setting, input path, local model (not for ``dry_run``) or plan (over the row cap, or
            its inputs unusable) the flags would refuse, or a ``--family`` family the target does
            not run; one line naming the target.
    """
    from pathlib import Path

    from ingestion.errors import DoraError, TargetConfigError
    from ingestion.registry import default_registry_path, load_registry
    from orchestration import families as fam
    from orchestration.cli.flags import op_run_configs
    from orchestration.defs.audits.runs import TargetRun, target_families, target_ops

    path = Path(args.registry).expanduser().resolve() if args.registry else default_registry_path()
    target = (registry or load_registry(path)).target(args.target)
    own = target_families(target, fam.FAMILIES)  # unknown families: one line
    outside = [p for p in dict.fromkeys(getattr(args, "family", None) or []) if p not in {f.name for f in own}]
    if outside:
        raise TargetConfigError(
            f"target {target.name!r} does not run {', '.join(outside)} (--family); its families: {', '.join(f.name for f in own)}"
        )
    ops = op_run_configs(args)
    ops.update(target_ops(target, fam.FAMILIES, registry=str(path), base=ops))  # every option and setting, one line
    for family in own:
        if family not in args.families:  # --family narrows the target's families
            ops.update(
                {
                    op: cfg.model_copy(update={"enabled": False})
                    for op, cfg in ops.items()
                    if op in family.configs and "enabled" in type(cfg).model_fields
                }
            )
    run = TargetRun(target, str(path), families=[f for f in own if f in args.families], ops=ops)
    problem = _input_problem(run, dry_run)
    for family in run.families:
        if problem is None and family.check is not None:
            problem = family.check(ops)
    if problem:
        raise TargetConfigError(problem if problem.startswith("target ") else f"target {target.name!r}: {problem}")
    plans = []
    if dry_run:  # the plans name the audit ids of the partition's version, as its run pins it
        from ingestion.errors import VersionError
        from models_inference.model_ref import resolve_version_with_source

        try:
            run.model_version, source = resolve_version_with_source(target)
            run.version_read = f"version {run.model_version} ({source})"
        except VersionError as exc:  # the real run would stop here; the plans use the model's own version
            run.version_read = f"version unreadable now: {one_line(exc)}"
    for family in run.families:
        if family.plan is None or not (dry_run or family.plan_before_run):
            continue
        try:  # the plan is where the row cap is checked (PlanTooLargeError), as for the flags' --dry-run
            plans.append(family.plan(ops, model_version=run.model_version))
        except (DoraError, ValueError, KeyError) as exc:
            message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            raise TargetConfigError(f"target {target.name!r}: {message.splitlines()[0] if message else type(exc).__name__}") from None
    if dry_run:  # the whole run's time: every step of the target's families (orchestration/estimates.py)
        from orchestration.estimates import estimate_text

        plans.append(estimate_text(run.families, ops, model_version=run.model_version))
    return run, "\n\n".join(p for p in plans if p)


def target_problem(args: argparse.Namespace) -> str | None:
    """The one-line reason ``dora audit --target`` must not start (``None`` when it may):
    :func:`target_run`'s error, before the Dagster instance is opened or a partition added. The
    checked run is kept on ``args.target_run`` for ``dora audit`` (the registry is read once)."""
    from ingestion.errors import DoraError

    try:
        args.target_run = target_run(args, dry_run=getattr(args, "dry_run", False))[0]
    except DoraError as exc:
        return one_line(exc)
    return None


def one_line(exc: BaseException) -> str:
    """An error's message on one line (an invalid registry's field list joined with ``; ``)."""
    from ingestion.errors import RegistryError

    if isinstance(exc, RegistryError):
        return f"invalid audit registry {exc.path}: {'; '.join(exc.problems)}"
    return " ".join(str(exc).split("\n"))


def dry_run_text(args: argparse.Namespace) -> str:
    """``dora audit --target NAME --dry-run``: a header (target, families, model, version and where
    it is read from), the plan of each family the target's run runs and, when a step of it sends
    its requests through the Batch API (``--api-batch``, or the target's option ``api_batch``),
    their files, requests and prompt tokens (``orchestration/cli/batch.py: batch_plan_text``, on
    the partition's version).

    Raises:
        DoraError: as :func:`target_run`.
    """
    from orchestration.cli.batch import batch_plan_text

    run, text = target_run(args, dry_run=True)  # the version is read once, there
    target = run.target
    head = (
        f"dora audit --dry-run --target {target.name}: families {', '.join(run.family_names)}, model "
        f"{target.model} ({target.backend}, {target.modality}), {run.version_read}"
    )
    batch = batch_plan_text(run.ops, model_version=run.model_version, target=target.name, api_key_env=target.api_key_env)
    return "\n\n".join(t for t in (f"{head}\n{text}" if text else head, batch) if t)


def target_checker(registry, registry_path: str | None):
    """``dora models list``'s check of each target: target -> the one-line reason
    ``dora audit --target`` would refuse it, or ``None`` (the command line's defaults for every
    flag the target does not set; no model loaded, version not read)."""
    from ingestion.errors import DoraError
    from orchestration.cli.parser import build_parser

    args = build_parser().parse_args(["audit", "--target", "x", *(["--registry", registry_path] if registry_path else [])])

    def check(target) -> str | None:
        args.target = target.name
        try:
            target_run(args, registry=registry)
        except DoraError as exc:
            return one_line(exc).removeprefix(f"target {target.name!r}: ")
        return None

    return check

"""``dora audit --target NAME``: the registry target checked like the flags it stands for, and its plan.

A target is a family, a model and settings that the command line would give as flags, so it
gets the flags' checks, through the same functions, before the Dagster instance is opened:
each option through its flag's argparse type (:func:`orchestration.options.option_values`),
the family's input paths (``Flag(path=)``) and local models (``Flag(local_model=)``), its
``check`` of the settings together, and its ``plan``, which refuses a plan over the row cap
(:class:`~ingestion.errors.PlanTooLargeError`). BiasDora's ``probe`` settings go through the
flags of the fields they set (``--runs``, ``--letters``, ``--images-per-descriptor``, ...).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

#: BiasDora's op configs that a target of each modality sets (the others keep the command line's).
_BIASDORA_OPS = {"t2t": ("t2t_completions",), "t2i": ("t2i_images", "i2t_descriptions"),
                 "i2t": ("t2i_images", "i2t_descriptions")}


@dataclass
class TargetRun:
    """What ``dora audit --target`` would run.

    Attributes:
        target: the registry entry. family: its :class:`~orchestration.family.ProbeFamily`.
        ops: op name -> Config of the run (the target's family configured, the others as the
            command line left them; they skip a target's partition).
        registry: the registry file (absolute path).
    """

    target: Any
    family: Any
    ops: dict
    registry: str


def _flag_for(family, cls: type, field: str):
    """The family's flag that sets ``cls.field`` (``None`` when no flag does)."""
    return next((f for f in family.flags for c, name in f.targets if c is cls and name == field), None)


def _biasdora_config(config, target, family):
    """BiasDora's op config of a ``target`` (``config_for_target``), each probe setting the
    target lists checked by the flag of the field it sets, then by the Config."""
    from pydantic import ValidationError

    from ingestion.errors import TargetConfigError
    from orchestration.options import option_value
    from orchestration.defs.audits.runs import config_for_target
    from orchestration.defs.biasdora.config import AuditConfig

    if isinstance(config, AuditConfig):
        fields = {name: name for name in target.probe.model_fields_set}
    else:  # a vision target: which VisionConfig field each probe setting becomes (config_for_target)
        m = target.modality
        fields = {"batch_size": f"{m}_batch_size", "settings": f"{m}_settings"}
        fields.update({"runs": "images_per_descriptor", "per_dimension": "per_dimension", "descriptors": "descriptors"}
                      if m == "t2i" else {"temperature": "i2t_temperature", "top_p": "i2t_top_p"})
        fields = {k: v for k, v in fields.items() if k in target.probe.model_fields_set}
    for setting, field in fields.items():
        flag = _flag_for(family, type(config), field)
        if flag is not None:
            option_value(flag, getattr(target.probe, setting), f"target {target.name!r}: probe.{setting}")
    built = config_for_target(config, target)
    try:  # model_copy does not validate: the Config's ranges are the flags' ranges
        return type(built).model_validate(built.model_dump())
    except ValidationError as exc:
        err = exc.errors()[0]
        raise TargetConfigError(f"target {target.name!r}: probe {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def _input_problem(run: TargetRun, dry_run: bool) -> str | None:
    """The first input path or local model of the target's options that the flag would refuse."""
    from ingestion.vocabulary import DEFAULT_MODEL
    from orchestration.cli_validation import LOCAL_BACKENDS, local_model_problem, path_problem

    family, name = run.family, run.target.name
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
            backend = "transformers" if flag.local_model == "always" else (
                getattr(run.ops[op], backend_flag.field_name, None) if backend_flag is not None else None)
            problem = local_model_problem(value, f"target {name!r}: {field}") if backend in LOCAL_BACKENDS else None
            if problem:
                return problem
    return None


def target_run(args: argparse.Namespace, *, dry_run: bool = False, registry=None) -> tuple[TargetRun, str]:
    """The run of ``dora audit --target`` (``args.target``, ``args.registry``), checked as its flags
    would be, and the plan its family prints for ``--dry-run``. Loads no model, opens no Dagster
    instance. ``registry``: the parsed registry of ``args.registry`` when already loaded.

    Returns:
        (the :class:`TargetRun`, the family's plan text; empty for a BiasDora target unless
        ``dry_run``: the ranges of its flags bound its plan, and planning T2I rows is slow).

    Raises:
        RegistryError: the registry file is missing or invalid. UnknownTargetError: no such target
            (one line listing the registered ones). TargetConfigError: a family, option, probe
            setting, input path, local model (not for ``dry_run``) or plan (over the row cap, or
            its inputs unusable) the flags would refuse; one line naming the target.
    """
    from pathlib import Path

    from ingestion.errors import DoraError, TargetConfigError
    from ingestion.registry import default_registry_path, load_registry
    from orchestration import families as fam
    from orchestration.cli.flags import op_run_configs
    from orchestration.defs.audits.runs import family_op_configs

    path = Path(args.registry).expanduser().resolve() if args.registry else default_registry_path()
    target = (registry or load_registry(path)).target(args.target)
    ops = op_run_configs(args, registry=str(path))
    ops.update(family_op_configs(target, fam.FAMILIES))  # the unknown family and every option, one line
    family = fam.get_family(target.family)
    if family.name == "biasdora":
        for op in _BIASDORA_OPS[target.modality]:
            ops[op] = _biasdora_config(ops[op], target, family)
        if target.modality == "t2t":  # a t2t target's partition skips the vision probes
            ops["t2i_images"] = ops["i2t_descriptions"] = ops["t2i_images"].model_copy(update={"t2i_model": None, "i2t_model": None})
    run = TargetRun(target, family, ops, str(path))
    problem = _input_problem(run, dry_run) or (family.check(ops) if family.check is not None else None)
    if problem:
        raise TargetConfigError(problem if problem.startswith("target ") else f"target {target.name!r}: {problem}")
    if family.name == "biasdora" and not dry_run:  # its flags' ranges bound its plan; planning T2I loads spaCy (~10 s)
        return run, ""
    try:  # the plan is where the row cap is checked (PlanTooLargeError), as for the flags' --dry-run
        text = _plan(run)
    except (DoraError, ValueError, KeyError) as exc:
        message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        raise TargetConfigError(f"target {target.name!r}: {message.splitlines()[0] if message else type(exc).__name__}") from None
    return run, text


def _plan(run: TargetRun) -> str:
    """The family's ``--dry-run`` plan of the target's run (BiasDora: of the target's modality)."""
    target = run.target
    if run.family.name != "biasdora" or target.modality == "t2t":
        return run.family.plan(run.ops) if run.family.plan is not None else ""
    from orchestration.dry_run import format_plan, t2i_plan_lines

    vision = run.ops["t2i_images"]
    if target.modality == "t2i":
        lines = t2i_plan_lines(vision.t2i_settings, vision.descriptors, vision.per_dimension, vision.images_per_descriptor)
        return format_plan(lines, None, None, "no T2T generation (a t2i target draws images only)")
    source = f"--image-audit-id {vision.image_audit_id}" if vision.image_audit_id else "this run's T2I probe (--t2i-model)"
    return (f"dora audit --dry-run: no model loaded; i2t target: {target.model} ({target.backend}) describes the images of "
            f"{source} with {len(vision.i2t_settings)} prompts ({', '.join(vision.i2t_settings)}); rows known once the images are listed")


def target_problem(args: argparse.Namespace) -> str | None:
    """The one-line reason ``dora audit --target`` must not start (``None`` when it may):
    :func:`target_run`'s error, before the Dagster instance is opened or a partition added."""
    from ingestion.errors import DoraError

    try:
        target_run(args, dry_run=getattr(args, "dry_run", False))
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
    """``dora audit --target NAME --dry-run``: a header (target, family, model, version and where
    it is read from) and the plan of the target's family.

    Raises:
        DoraError: as :func:`target_run`.
    """
    from ingestion.errors import VersionError
    from models_inference.model_ref import resolve_version_with_source

    run, text = target_run(args, dry_run=True)
    target = run.target
    try:
        version, source = resolve_version_with_source(target)
        where = f"version {version} ({source})"
    except VersionError as exc:  # the real run would stop here; the plan is still worth seeing
        where = f"version unreadable now: {one_line(exc)}"
    head = (f"dora audit --dry-run --target {target.name}: family {target.family}, model {target.model} "
            f"({target.backend}), {where}")
    return f"{head}\n{text}" if text else head


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

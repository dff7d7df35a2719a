"""``dora audit`` flags that configure assets, derived from every family's Config classes.

Each family declares its flags as :class:`~orchestration.family.Flag` rows over its Config
fields (``orchestration/defs/<family>/family.py``); the flag's type, default, help, choices
and range come from the field (annotation, default, ``description``, ``Literal`` or the
flag's vocabulary tuple, pydantic ``ge`` / ``gt`` / ``le`` / ``lt``), so a default is stated
once, in the Config class, and a value out of range is an argparse error (exit 2, one line)
before Dagster starts. :func:`audit_run_config` turns parsed arguments into a typed
``dg.RunConfig`` (one Config object per op of every family).

Conventions: a ``list`` field takes a comma-separated value (or a repeated flag); a ``bool``
field that defaults to True gets ``--[prefix]no-<name>``, one that defaults to False
``--[prefix]<name>``. The common flags (:data:`COMMON_FIELDS`) set the field of that name on
every op config of every family that has it.
"""

from __future__ import annotations

import argparse

import dagster as dg

from orchestration import families as fam
from orchestration.defs.common import CommonFlags
from orchestration.deprecation import add_deprecated
from orchestration.family import Flag, ProbeFamily
from orchestration.options import csv_list  # noqa: F401 - csv_list: part of this module's API
from orchestration.options import flag_type as _validator

#: Fields every family may have, set by one flag each (``--max-error-share``, ``--no-progress``,
#: the Batch API options ``--api-batch``...).
COMMON_FIELDS = (
    "max_error_share",
    "progress",
    "api_batch",
    "api_batch_max_requests",
    "api_batch_wait",
    "api_batch_poll",
    "api_batch_retries",
    "api_batch_max_open",
)


def common_flags() -> tuple[Flag, ...]:
    """The common flags, each targeting every op config (of every family) that has its field."""
    out = []
    for name in COMMON_FIELDS:
        targets = [(CommonFlags, name)]
        for family in fam.FAMILIES:
            targets += [(cls, name) for cls in family.config_classes if name in cls.model_fields]
        out.append(Flag(tuple(targets)))
    return tuple(out)


def _help(flag: Flag, default) -> str:
    """The field's description, and its default once (never for switches or empty defaults)."""
    text = flag.field.description or ""
    if flag.kind is bool:
        return f"do not {text}" if flag.negated and text else text
    if default not in (None, "", [], ()) and "default" not in text:
        text = f"{text} (default: {default})" if text else f"default: {default}"
    return text.replace("%", "%%")


def add_family_flags(target, flags: tuple[Flag, ...], seen: set[str]) -> None:
    """Add ``flags`` to ``target`` (a parser or argument group), skipping names in ``seen``
    (a flag another family declared: its value is shared)."""
    for flag in flags:
        if flag.flag in seen:
            continue
        seen.add(flag.flag)
        names = (flag.flag, *flag.aliases)
        field, kind = flag.field, flag.kind
        if kind is bool:
            action = "store_false" if flag.negated else "store_true"
            target.add_argument(*names, dest=flag.arg_dest, action=action, default=field.default, help=_help(flag, None))
            add_deprecated(target, flag.deprecated, flag.flag, flag.arg_dest, switch=not flag.negated)
            continue
        default = field.get_default(call_default_factory=True)
        choices = flag.choices or flag.literal_choices
        kw = {}
        if flag.repeat:
            kw.update(action="append", default=None, choices=choices)
        elif kind is list:
            kw.update(default=",".join(str(d) for d in default))
        else:
            kw.update(default=default, choices=choices)
        type_ = _validator(flag) if not flag.repeat else None
        if type_ is None and kind in (int, float) and not flag.repeat:
            type_ = kind
        if type_ is not None:
            kw["type"] = type_
        if choices and kind is list and not flag.repeat:
            kw["metavar"] = "{" + ",".join(choices) + "}[,...]"
        shown = ",".join(str(d) for d in default) if isinstance(default, list) else default
        target.add_argument(*names, dest=flag.arg_dest, help=_help(flag, shown), **kw)
        old = {k: v for k, v in kw.items() if k in ("type", "choices")}
        add_deprecated(target, flag.deprecated, flag.flag, flag.arg_dest, append=flag.repeat, **old)


def add_common_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Add the common flags to ``parser``; returns the names added."""
    seen: set[str] = set()
    add_family_flags(parser, common_flags(), seen)
    return seen


def family_group_title(family: ProbeFamily) -> str:
    return f"{family.name}: {family.title} (dora audit --family {family.name})"


def shared_family_flags() -> dict[tuple[str, ...], tuple[Flag, ...]]:
    """The flags that several families declare (``--model``, ``--backend``, ... of BiasDora and
    the counterfactual family: one value sets each family's field), grouped by the families
    declaring them (in :data:`~orchestration.families.FAMILIES` order): {families: the first
    declaration of each flag}."""
    users: dict[str, list[str]] = {}
    first: dict[str, Flag] = {}
    for family in fam.FAMILIES:
        for flag in family.flags:
            users.setdefault(flag.flag, []).append(family.name)
            first.setdefault(flag.flag, flag)
    groups: dict[tuple[str, ...], list[Flag]] = {}
    for name, families in users.items():
        if len(families) > 1:
            groups.setdefault(tuple(dict.fromkeys(families)), []).append(first[name])
    return {families: tuple(flags) for families, flags in groups.items()}


def add_all_family_flags(parser: argparse.ArgumentParser, seen: set[str], shown: str | None = "*") -> None:
    """The flags several families share (:func:`shared_family_flags`), one argument group per
    set of families, then one argument group per family with its own flags. In ``--help``:
    the shared groups always (plain ``dora audit --help``), except under ``--help-family`` of
    a family that does not use them; of the families' own groups only that of ``shown`` (all
    for ``"*"``). Every flag parses either way (a hidden one's help is suppressed)."""
    for families, flags in shared_family_flags().items():
        visible = shown in (None, "*") or shown in families
        title = f"flags of {', '.join(families)} (one value sets each of these families' field)"
        group = parser.add_argument_group(title) if visible else parser
        before = len(parser._actions)
        add_family_flags(group, flags, seen)
        if not visible:
            for action in parser._actions[before:]:
                action.help = argparse.SUPPRESS
    for family in fam.FAMILIES:
        visible = shown == "*" or shown == family.name
        group = parser.add_argument_group(family_group_title(family), family.description) if visible else parser
        before = len(parser._actions)
        add_family_flags(group, family.flags, seen)
        if not visible:
            for action in parser._actions[before:]:
                action.help = argparse.SUPPRESS


def config_values(args: argparse.Namespace) -> dict[type[dg.Config], dict]:
    """{Config class: {field: value}} from parsed ``dora audit`` arguments (lists split,
    each family's cross-flag rules applied)."""
    values: dict[type[dg.Config], dict] = {}
    for flag in (*common_flags(), *(f for family in fam.FAMILIES for f in family.flags)):
        value = getattr(args, flag.arg_dest, None)
        if flag.repeat:
            value = list(value or [])
        elif flag.kind is list:
            value = csv_list(value)
        if flag.convert is not None:
            value = flag.convert(value)
        for cls, name in flag.targets:
            values.setdefault(cls, {})[name] = value
    for family in fam.FAMILIES:
        if family.adjust is not None:
            family.adjust(values)
    return values


def select_families(args: argparse.Namespace) -> None:
    """Set ``args.families``, once, when ``dora audit``'s arguments are parsed: the families
    ``--family`` selects (no ``--family``: every family), as :class:`ProbeFamily` records in
    ``FAMILIES`` order; every later step reads it."""
    names = getattr(args, "family", None)
    args.families = tuple(f for f in fam.FAMILIES if not names or f.name in names)


def op_run_configs(args: argparse.Namespace) -> dict[str, dg.Config]:
    """Op name -> its Config object for every op of every family.

    A Config with an ``enabled`` field is disabled when ``--family`` does not select its family.
    """
    values = config_values(args)
    ops: dict[str, dg.Config] = {}
    for family in fam.FAMILIES:
        on = family in args.families
        built: dict[type, dg.Config] = {}
        for op, cls in family.configs.items():
            if cls not in built:
                fields = dict(values.get(cls, {}))
                if "enabled" in cls.model_fields:
                    fields["enabled"] = fields.get("enabled", True) and on
                built[cls] = cls(**fields)
            ops[op] = built[cls]
    return ops


def audit_run_config(args: argparse.Namespace) -> dg.RunConfig:
    """The typed run config of the audit job from ``dora audit`` arguments (see :func:`op_run_configs`)."""
    return dg.RunConfig(
        ops=op_run_configs(args),
        # step failures are summarised by `dora audit` in one line each; Dagster's own console
        # copy of every traceback only with --verbose
        loggers={"console": {"config": {"log_level": "WARNING" if getattr(args, "verbose", False) else "CRITICAL"}}},
    )


def family_problem(args: argparse.Namespace) -> str | None:
    """The first problem of ``dora audit``'s family flags, before Dagster starts (one line), or ``None``.

    Checks, for every family: each flag declared with ``path=`` (``cli_validation.path_problem``), each
    flag declared with ``local_model=`` that runs on a local backend (``cli_validation.local_model_problem``;
    not for ``--dry-run``, which loads no model); then each selected family's ``check`` of its
    op configs (``orchestration/family.py``).
    """
    from ingestion.vocabulary import DEFAULT_MODEL
    from orchestration.cli_validation import LOCAL_BACKENDS, local_model_problem, path_problem

    dry_run = getattr(args, "dry_run", False)
    for family in fam.FAMILIES:
        for flag in family.flags:
            value = getattr(args, flag.arg_dest, None)
            if not isinstance(value, str) or not value:
                continue
            if flag.path:
                problem = path_problem(value, flag.path, flag.flag)
                if problem:
                    return problem
            if flag.local_model and not dry_run and value != DEFAULT_MODEL:
                backend = "transformers" if flag.local_model == "always" else getattr(args, flag.local_model, None)
                problem = local_model_problem(value, flag.flag) if backend in LOCAL_BACKENDS else None
                if problem:
                    return problem
    checks = [f for f in args.families if f.check is not None]
    if checks:
        ops = op_run_configs(args)
        for family in checks:
            problem = family.check(ops)
            if problem:
                return problem
    return None


def __getattr__(name: str):
    if name == "OP_CONFIGS":  # op name -> Config class, over every family (computed: FAMILIES may change)
        return fam.op_configs()
    raise AttributeError(name)

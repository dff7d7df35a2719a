"""A registry target's ``options`` as the ``dora audit`` flags they stand for.

A target names each of its families' settings in ``options`` (``{modscan: {samples: 20}}``);
each one is checked by its flag's own argparse type (the Config field's range and choices, or
the flag's validator: letters, URLs, ids), so a target cannot ask for what the flag refuses.
Also the argparse ``type`` of a flag (:func:`flag_type`), which ``orchestration/cli/flags.py``
builds the parser with. This module imports no family (``orchestration/defs/audits/runs.py``
imports it).
"""

from __future__ import annotations

import argparse

from orchestration.deprecation import deprecation_notice
from orchestration.family import Flag, ProbeFamily


def csv_list(text: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def flag_type(flag: Flag):
    """The argparse ``type`` of a flag: its own validator, else its field's range, choices or kind."""
    from orchestration import cli_validation as v

    if flag.validator is not None:
        return flag.validator
    kind = flag.kind
    if kind is list:
        if flag.choices:
            default = flag.field.get_default(call_default_factory=True)
            return v.csv_choices(flag.choices, flag.what or flag.field_name.replace("_", " ").rstrip("s"), allow_empty=not default)
        return None
    if kind in (int, float):
        return v.number_range(kind, **flag.bounds)
    return None


def option_value(flag: Flag, value, where: str):
    """A registry option's value checked and converted as ``flag``'s command-line value would be.

    Args:
        flag: the family's flag the option stands for. value: the YAML value (a list or a
            comma-separated string for a list field; true / false for a switch).
        where: the message's start (``"target 'cf': option seeds"``).

    Returns:
        The Config field's value (lists as lists, ``flag.convert`` applied).

    Raises:
        TargetConfigError: one line, ``<where> (<flag>): <the flag's own message>``.
    """
    from ingestion.errors import TargetConfigError
    from orchestration import cli_validation as v

    at = f"{where} ({flag.flag})"
    kind = flag.kind
    if value is None:
        if not flag.field.is_required() and flag.field.get_default() is None:
            return flag.convert(None) if flag.convert else None
        raise TargetConfigError(f"{at}: a value is required")
    if kind is bool:
        if not isinstance(value, bool):
            raise TargetConfigError(f"{at}: {value!r} is not true or false")
        return value
    try:
        if kind is list:
            if isinstance(value, str):
                items = csv_list(value)
            elif isinstance(value, list) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in value):
                items = [str(x).strip() for x in value]
            else:
                raise argparse.ArgumentTypeError(f"{value!r} is not a list of strings")
            check = (
                v.csv_choices(flag.choices, flag.what or flag.field_name.replace("_", " ").rstrip("s"), allow_empty=True)
                if flag.repeat and flag.choices
                else flag_type(flag)
            )
            if check is not None:
                check(",".join(items))
            parsed = items
        else:
            if isinstance(value, (bool, list, dict)) or (kind is str and not isinstance(value, str)):
                raise argparse.ArgumentTypeError(f"{value!r} is not {'a string' if kind is str else 'a number'}")
            check = flag_type(flag)
            parsed = check(str(value)) if check is not None else value
            choices = flag.choices or flag.literal_choices
            if choices and parsed not in choices:
                raise argparse.ArgumentTypeError(f"invalid choice {parsed!r} (choose from {', '.join(map(str, choices))})")
    except argparse.ArgumentTypeError as exc:
        raise TargetConfigError(f"{at}: {exc}") from None
    return flag.convert(parsed) if flag.convert is not None else parsed


def option_spelling(family: ProbeFamily, flag: Flag | str) -> str:
    """The option name of ``flag`` (or of a flag name such as an old spelling) in a registry
    target: the flag without ``--`` and the family's prefix, dashes as underscores (``instances``
    for ``--modscan-instances``)."""
    prefix = family.flag_prefix.lstrip("-")
    spelled = (flag if isinstance(flag, str) else flag.flag).lstrip("-")
    spelled = spelled[len(prefix) :] if prefix and spelled.startswith(prefix) else spelled
    return spelled.replace("-", "_")


def _common_flag(field: str) -> Flag | None:
    """The common flag of a field every family may have (``--api-batch``, ``--max-error-share``),
    as ``dora audit`` declares it over :class:`orchestration.defs.common.CommonFlags`."""
    from orchestration.defs.common import CommonFlags

    return Flag(((CommonFlags, field),)) if field in CommonFlags.model_fields else None


#: the option of a family's drift checks' collapse thresholds: ``options: {<family>: {checks: {<check>: <ratio>}}}``
CHECKS_OPTION = "checks"


def drift_threshold_problems(family: ProbeFamily, value) -> list[str]:
    """The problems (one line each) of a family's ``checks`` option: a mapping of its drift
    checks' names (``family.drift.checks``) to a collapse ratio in (0, 1]."""
    checks = [c.name for c in family.drift.checks] if family.drift else []
    if not isinstance(value, dict):
        return [
            f"option checks ({family.name}): must be a mapping of drift checks to a collapse ratio in (0, 1] ({{<check>: <ratio>}}), got {value!r}"
        ]
    problems = []
    for name, ratio in value.items():
        if name not in checks:
            problems.append(f"option checks.{name} ({family.name}): not a drift check of the family; its checks: {', '.join(checks) or 'none'}")
        elif isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            problems.append(f"option checks.{name} ({family.name}): the collapse ratio must be a number in (0, 1], got {ratio!r}")
    return problems


def drift_thresholds(target, family: ProbeFamily) -> dict[str, float]:
    """{drift check: collapse ratio} a registry target sets for ``family`` (its ``options:
    {<family>: {checks: ...}}``, checked when the registry's targets are), plus what the
    family's ``legacy_thresholds`` reads from older registry fields."""
    return collapse_ratios(target, family.name, family.legacy_thresholds)


def collapse_ratios(target, name: str, legacy=None) -> dict[str, float]:
    """{drift check: collapse ratio} a registry target sets for the family called ``name``:
    ``legacy(target)`` (the ratios of older registry fields, or ``None``) overridden by its
    ``options: {<name>: {checks: ...}}``. A check not named keeps its default ratio
    (``analytics.drift.DriftCheck.min_ratio``)."""
    out = dict(legacy(target)) if legacy else {}
    given = (getattr(target, "options", None) or {}).get(name) or {}
    checks = given.get(CHECKS_OPTION) if isinstance(given, dict) else None
    if isinstance(checks, dict):
        out.update({k: float(v) for k, v in checks.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return out


def family_options(family: ProbeFamily, options: dict) -> tuple[dict[type, dict], dict[tuple[type, str], str], list[str]]:
    """A registry target's options for ``family`` as run-config values, each checked as its flag.

    An option is a flag of the family spelled as :func:`option_spelling` (it sets every field the
    flag sets), else the name of a field of the family's Config classes (set on each class that
    has it; checked by the flag that sets the field, if one does, else by the common flag of
    that name, ``orchestration/defs/common.py: CommonFlags``: ``api_batch: true`` is checked as
    ``--api-batch``, ``api_batch_max_requests`` as its range; else left to the Config's own
    validation). A switch that defaults to True (``--no-<field>``) is named by its field.

    Returns:
        ({Config class: {field: value}}, {(Config class, field): the option that set it}, problems):
        one line per unknown option (with the closest names), per two options setting one field,
        per value its flag refuses (``option runs (--cf-runs): 0 is out of range: ...``).
    """
    import difflib

    from ingestion.errors import TargetConfigError

    spelled = {option_spelling(family, f): f for f in family.flags if not (f.kind is bool and f.negated)}
    # an option spelled as a flag's old name (kept for one release) is read as the flag, with a notice
    old_names = {option_spelling(family, old): f for f in family.flags for old in f.deprecated}
    by_field = {(c, name): f for f in family.flags for c, name in f.targets}
    values: dict[type, dict] = {}
    given: dict[tuple[type, str], str] = {}
    problems: list[str] = []
    for name, value in options.items():
        key = str(name).replace("-", "_")
        if key == CHECKS_OPTION:  # the drift checks' thresholds are no flag: read by drift_thresholds
            problems += drift_threshold_problems(family, value)
            continue
        flag = spelled.get(key)
        if flag is None and key in old_names:
            flag = old_names[key]
            deprecation_notice(f"option {name!r}", f"{option_spelling(family, flag)!r} ({flag.flag})", "dora registry")
        if flag is not None:
            targets = [(c, f) for c, f in flag.targets if c in family.config_classes]
        else:
            targets = [(c, key) for c in family.config_classes if key in c.model_fields]
        if not targets:
            names = sorted({*spelled, *(f for c in family.config_classes for f in c.model_fields)})
            close = difflib.get_close_matches(key, names, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            problems.append(
                f"unknown option {name!r} for family {family.name}{hint}; options are the flags of dora audit "
                f"--help-family {family.name} without {family.flag_prefix} (or their run-config field names)"
            )
            continue
        clash = next((given[t] for t in targets if t in given), None)
        if clash is not None:
            problems.append(f"options {clash!r} and {name!r} both set {targets[0][1]}; give one")
            continue
        check = flag or by_field.get(targets[0]) or _common_flag(key)
        try:
            checked = option_value(check, value, f"option {name}") if check is not None else value
        except TargetConfigError as exc:
            problems.append(str(exc))
            continue
        for cls, field in targets:
            values.setdefault(cls, {})[field] = checked
            given[(cls, field)] = str(name)
    return values, given, problems

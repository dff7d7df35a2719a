"""A registry target's ``options`` as the ``dora audit`` flags they stand for.

A target of a probe family names that family's settings in ``options``; each one is checked by
its flag's own argparse type (the Config field's range and choices, or the flag's validator:
letters, URLs, ids), so a target cannot ask for what the flag refuses. Also the argparse
``type`` of a flag (:func:`flag_type`), which ``orchestration/cli/flags.py`` builds the parser
with. This module imports no family (``orchestration/defs/audits/runs.py`` imports it).
"""

from __future__ import annotations

import argparse

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


def option_names(family: ProbeFamily, cls: type) -> dict[str, tuple[str, Flag | None]]:
    """The option names a registry target of ``family`` may use for Config class ``cls``.

    Returns:
        {name: (field of ``cls``, the flag that sets it or ``None``)}: every field name of ``cls``,
        and the name of each of the family's flags without ``--`` and the family's prefix, dashes as
        underscores (``instances`` for ``--modscan-instances``, ``download`` for
        ``--vlstereoset-download``); a field's own name wins over another field's flag name.
    """
    flags: dict[str, Flag] = {}  # the common fields (max_error_share, progress): by their names, checked by the Config
    for flag in family.flags:
        for c, name in flag.targets:
            if c is cls:
                flags.setdefault(name, flag)
    names: dict[str, tuple[str, Flag | None]] = {name: (name, flags.get(name)) for name in cls.model_fields}
    prefix = family.flag_prefix.lstrip("-")
    for field, flag in flags.items():
        if flag.kind is bool and flag.negated:  # --no-<field>: the option is the field (true / false)
            continue
        spelled = flag.flag.lstrip("-")
        spelled = spelled[len(prefix):] if prefix and spelled.startswith(prefix) else spelled
        names.setdefault(spelled.replace("-", "_"), (field, flag))
    return names


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
            check = v.csv_choices(flag.choices, flag.what or flag.field_name.replace("_", " ").rstrip("s"),
                                  allow_empty=True) if flag.repeat and flag.choices else flag_type(flag)
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


def option_values(family: ProbeFamily, cls: type, options: dict, where: str) -> dict:
    """{field: value} of Config class ``cls`` from a registry target's ``options``
    (:func:`option_names`, each value through :func:`option_value`; a field without a flag is
    left to the Config's own validation).

    Raises:
        TargetConfigError: an unknown option (with the closest names), two options for one
            field, or a value its flag refuses (one line).
    """
    import difflib

    from ingestion.errors import TargetConfigError

    names = option_names(family, cls)
    out: dict = {}
    given: dict[str, str] = {}
    for name, value in options.items():
        key = str(name).replace("-", "_")
        if key not in names:
            close = difflib.get_close_matches(key, list(names), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise TargetConfigError(f"{where}: unknown option {name!r} for family {family.name}{hint}; options are the "
                                    f"flags of dora audit --help-family {family.name} without {family.flag_prefix} "
                                    "(or their run-config field names)")
        field, flag = names[key]
        if field in given:
            raise TargetConfigError(f"{where}: options {given[field]!r} and {name!r} both set {field}; give one")
        given[field] = str(name)
        out[field] = option_value(flag, value, f"{where}: option {name}") if flag is not None else value
    return out

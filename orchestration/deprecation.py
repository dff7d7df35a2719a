"""Old names kept working for one release: a flag or registry option that was renamed still
sets the new one's value, and says once on stderr which name to use instead.

dora names a concept one way everywhere (docs/glossary.md): a probe family is a *family*, a
prompt's repetitions are *runs*. The old spellings (:data:`RENAMED_FLAGS`, the one table) are
hidden from ``--help`` and read until
:data:`REMOVED_IN`; an old name given together with its new one is refused
(:func:`old_and_new_given`), as the registry refuses such a pair of options.
"""

from __future__ import annotations

import argparse
import sys

#: The release that drops the old spellings.
REMOVED_IN = "0.2"

#: The one table of old names still read until :data:`REMOVED_IN`: each flag's old spellings. A
#: family's flag (``Flag.deprecated``), a command's flag (:func:`add_deprecated`) and a registry
#: option spelled the old way (``orchestration/options.py``) all read theirs from here; nothing
#: else in the code, the docs or ``--help`` names them (``tests/test_glossary.py``; the glossary
#: lists them as the words not used).
RENAMED_FLAGS: dict[str, tuple[str, ...]] = {
    "--family": ("--probe",),
    "--judge-runs": ("--judge-repeats",),
    "--cf-runs": ("--cf-seeds",),
    "--modscan-runs": ("--modscan-samples",),
    "--t2t-block-templates": ("--t2t-block-targets",),
}

#: Landed columns that keep an old name, so every Parquet file already written stays readable:
#: landing table -> {landed column: the word staging names it} (docs/glossary.md: a repetition
#: of a prompt is a *run*).
LANDED_COLUMNS: dict[str, dict[str, str]] = {
    "judge_ratings": {"repeat": "run"},
    "counterfactual_responses": {"seed": "run"},
    "counterfactual_stereotype_flags": {"repeat": "run"},
    "modscan_responses": {"sample": "run"},
}

#: Code names retired for good (one class, one word): no module, doc or help text uses them.
RETIRED_NAMES: tuple[str, ...] = ("RunTarget",)


def old_names(flag: str) -> tuple[str, ...]:
    """The old spellings of ``flag`` still read (:data:`RENAMED_FLAGS`), else ``()``."""
    return RENAMED_FLAGS.get(flag, ())


_said: set[str] = set()


def deprecation_notice(old: str, new: str, where: str = "dora") -> None:
    """Write ``<where>: warning: <old> is deprecated ...; use <new>`` to stderr, once per process
    and old name (a flag given three times warns once)."""
    if old in _said:
        return
    _said.add(old)
    print(f"{where}: warning: {old} is deprecated and will be removed in dora {REMOVED_IN}; use {new}", file=sys.stderr)


class DeprecatedSpelling(argparse.Action):
    """An old flag name: stores (or appends, or sets a switch) into the new flag's ``dest``, after a
    deprecation notice. Its default is ``argparse.SUPPRESS``, so the new flag's default stands."""

    def __init__(self, option_strings, dest, *, replacement: str, append: bool = False, **kwargs):
        kwargs.setdefault("default", argparse.SUPPRESS)
        kwargs["help"] = argparse.SUPPRESS
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement
        self.append = append

    def __call__(self, parser, namespace, values, option_string=None):
        deprecation_notice(option_string or self.option_strings[0], self.replacement, parser.prog.split()[0])
        if self.nargs == 0:
            setattr(namespace, self.dest, self.const)
        elif self.append:
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])
        else:
            setattr(namespace, self.dest, values)


def old_and_new_given(parser: argparse.ArgumentParser, arg_strings: list[str]) -> str | None:
    """The one-line refusal of an old flag name given together with its new name, else ``None``.

    An old and a new name given together would otherwise let the last one win without a word; the registry
    refuses the same pair (``orchestration/options.py``). Read from ``parser``'s own options before
    it parses ``arg_strings`` (so no deprecation notice is printed for a refused line), the way
    argparse reads them: ``--flag value`` and ``--flag=value``, an unambiguous prefix of a flag
    when the parser allows abbreviations, nothing after ``--``.
    """
    actions = parser._option_string_actions
    given: dict[argparse.Action, str] = {}
    for arg in arg_strings:
        if arg == "--":
            break
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0]
        action = actions.get(name)
        if action is None and parser.allow_abbrev:
            matches = {actions[o] for o in actions if o.startswith(name)}
            action = matches.pop() if len(matches) == 1 else None
        if action is not None:
            given.setdefault(action, name)
    for action, old in given.items():
        new = actions.get(action.replacement) if isinstance(action, DeprecatedSpelling) else None
        if new is not None and new in given:
            return f"{old} and {action.replacement} given together: {old} is the old name of {action.replacement}; give {action.replacement} only"
    return None


def add_deprecated(
    parser, old: tuple[str, ...] | list[str], replacement: str, dest: str, *, append: bool = False, switch: bool | None = None, **kwargs
) -> None:
    """Add the hidden old spellings ``old`` of the flag ``replacement`` (same ``dest``; ``type`` and
    ``choices`` in ``kwargs`` as the new flag's). ``switch``: the value a store_true / store_false
    flag stores (no argument taken)."""
    if not old:
        return
    if switch is not None:
        kwargs.update(nargs=0, const=switch)
    parser.add_argument(*old, dest=dest, action=DeprecatedSpelling, replacement=replacement, append=append, **kwargs)


__all__ = [
    "LANDED_COLUMNS",
    "REMOVED_IN",
    "RENAMED_FLAGS",
    "RETIRED_NAMES",
    "DeprecatedSpelling",
    "add_deprecated",
    "deprecation_notice",
    "old_and_new_given",
    "old_names",
]

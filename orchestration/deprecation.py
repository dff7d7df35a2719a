"""Old names kept working for one release: a flag or registry option that was renamed still
sets the new one's value, and says once on stderr which name to use instead.

dora names a concept one way everywhere (docs/glossary.md): a probe family is a *family*
(``--family``, not ``--probe``), a prompt's repetitions are *runs* (``--judge-runs``, not
``--judge-repeats``). The old spellings are hidden from ``--help`` and read until
:data:`REMOVED_IN`; an old name given together with its new one is refused
(:func:`old_and_new_given`), as the registry refuses such a pair of options.
"""

from __future__ import annotations

import argparse
import sys

#: The release that drops the old spellings.
REMOVED_IN = "0.2"

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

    ``--cf-seeds 2 --cf-runs 5`` would otherwise let the last one win without a word; the registry
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


__all__ = ["REMOVED_IN", "DeprecatedSpelling", "add_deprecated", "deprecation_notice", "old_and_new_given"]

"""Flag validation of the ``dora`` command, at argparse level: one mechanism for every family.

Every bad flag is refused by argparse itself, before Dagster runs anything (and before torch
or dbt is imported): one line of message, exit code 2, about a second. Two layers:

* argparse ``type=`` callables for what one flag decides alone: :func:`number_range` and
  :func:`csv_choices`, which ``orchestration/cli/flags.py`` derives from each Config field's
  pydantic constraints and choices (every family's flags), and :func:`letters`,
  :func:`audit_id`, :func:`image_size`, :func:`base_urls`, :func:`celery_broker`, which a family's flag table names
  for values a range cannot describe;
* :func:`check_args` for what depends on several flags (the ad-hoc ``--model`` named for a
  local backend must exist, except for ``dora audit --dry-run``, which loads no model; every
  other model flag is a family's, declared with ``Flag(local_model=)`` and checked by
  ``orchestration/cli/flags.py: family_problem``) or on the
  file system (``--out`` must not be a file; every family flag declared with ``path=`` must
  name an existing file or folder of the right kind, :func:`ingestion.input_paths.path_problem`); each selected
  family's own ``check`` of its settings taken together runs next
  (``orchestration/cli/flags.py: family_problem``, which knows the families).

The limits are stated on the Config fields (``le=`` with the ``MAX_*`` of
:mod:`orchestration.defaults`): generous for real use, small enough that a typo cannot exhaust
the machine (``--runs 1000000000`` would build a plan of billions of rows).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Callable, Sequence

from ingestion.input_paths import path_problem  # the one check of every input path (re-exported: the families' flags use it)


def int_range(lo: int, hi: int, what: str = "") -> Callable[[str], int]:
    """argparse type: an integer in ``[lo, hi]`` (message names the range and ``what`` 0 means)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range: expected {lo}..{hi}{what}")
        return value

    return parse


def float_range(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """argparse type: a finite float in ``[lo, hi]`` (``(lo, hi]`` when ``lo_open``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (lo < value if lo_open else lo <= value) or not value <= hi:
            raise argparse.ArgumentTypeError(f"{value:g} is out of range: expected {'(' if lo_open else '['}{lo:g}, {hi:g}]")
        return value

    return parse


def number_range(kind: type, *, ge=None, gt=None, le=None, lt=None) -> Callable[[str], float]:
    """argparse type of an ``int`` / ``float`` Config field: a finite number within the field's
    pydantic constraints (``ge`` / ``gt`` / ``le`` / ``lt``; none: any finite number)."""
    import math

    what = "an integer" if kind is int else "a number"
    lo = f"[{ge:g}" if ge is not None else (f"({gt:g}" if gt is not None else "(-inf")
    hi = f"{le:g}]" if le is not None else (f"{lt:g})" if lt is not None else "inf)")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if (ge is not None and value < ge) or (gt is not None and value <= gt) or (le is not None and value > le) or (lt is not None and value >= lt):
            if kind is int and ge is not None and le is not None:
                raise argparse.ArgumentTypeError(f"{value} is out of range: expected {ge}..{le}")
            raise argparse.ArgumentTypeError(f"{value:g} is out of range: expected {lo}, {hi}")
        return value

    return parse


def csv_choices(choices: Sequence[str], what: str, *, allow_empty: bool = False) -> Callable[[str], str]:
    """argparse type: a comma-separated subset of ``choices`` without repeats, non-empty unless
    ``allow_empty`` (returned as given, the callers split it)."""

    def parse(text: str) -> str:
        items = [p.strip() for p in text.split(",") if p.strip()]
        if not items and not allow_empty:
            raise argparse.ArgumentTypeError(f"no {what} given; expected some of {','.join(choices)}")
        unknown = [p for p in items if p not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what} {','.join(unknown)}; expected some of {','.join(choices)}")
        if len(set(items)) != len(items):
            raise argparse.ArgumentTypeError(f"a {what} is repeated in {text!r}")
        return ",".join(items)

    return parse


def letters(text: str) -> str:
    """argparse type of ``--letters``: distinct lower-case a-z letters."""
    if not text or any(not ("a" <= c <= "z") for c in text):
        raise argparse.ArgumentTypeError(f"{text!r}: expected lower-case letters a-z, e.g. 'abc'")
    if len(set(text)) != len(text):
        raise argparse.ArgumentTypeError(f"{text!r} repeats a letter (each key would be generated twice)")
    return text


_AUDIT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]{0,119}$")


def audit_id(text: str) -> str:
    """argparse type of ``--audit-id``: 1-120 of ``A-Z a-z 0-9 . _ = -`` (it names a folder)."""
    if not _AUDIT_ID.match(text):
        raise argparse.ArgumentTypeError(f"{text!r}: an audit id is 1-120 of A-Z a-z 0-9 . _ = - starting with a letter or digit")
    return text


def image_size(text: str) -> str:
    """argparse type of ``--t2i-size``: ``<width>x<height>``."""
    if not re.match(r"^[1-9][0-9]{0,4}x[1-9][0-9]{0,4}$", text):
        raise argparse.ArgumentTypeError(f"{text!r}: expected <width>x<height>, e.g. 1024x1024")
    return text


def base_urls(text: str) -> str:
    """argparse type of the ``--*-base-url`` flags: one http(s) URL, or several separated by
    commas (a fleet of servers behind one target); returned comma-joined."""
    from ingestion.registry import base_url_list

    try:
        urls = base_url_list(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not urls:
        raise argparse.ArgumentTypeError("no URL given; expected http(s)://host[:port]/v1 (or several, comma-separated)")
    return ",".join(urls)


def celery_broker(text: str) -> str:
    """argparse type of ``--celery-broker``: a URL of a kombu transport workers can share
    (:func:`orchestration.cluster.broker_problem`); the message never shows a password."""
    from orchestration.cluster import broker_problem

    problem = broker_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _looks_like_path(ref: str) -> bool:
    return ref.startswith((".", "/", "~")) or ref.endswith(".gguf") or os.sep in ref and ref.count("/") != 1


def _hub_cached(ref: str) -> bool:
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:  # pragma: no cover
        return False
    return (Path(HF_HUB_CACHE) / f"models--{ref.replace('/', '--')}").is_dir()


def local_model_problem(ref: str, flag: str) -> str | None:
    """Why ``ref`` cannot name a local model for ``flag`` (``None`` if it can): a path that
    does not exist, or a name that is neither a path nor a hub id in the Hugging Face cache."""
    path = Path(ref).expanduser()
    if path.exists():  # a model file or folder: a FIFO or device would block the loader
        return path_problem(ref, "file_or_folder", flag)
    if _looks_like_path(ref):
        return f"{flag} {ref}: no such file or folder"
    if _hub_cached(ref):
        return None
    return (
        f"{flag} {ref}: not a local folder or file, and not a hub id in the Hugging Face cache "
        "(downloads are off); give a local path, or pre-download the model"
    )


def precheck(argv: Sequence[str]) -> None:
    """Check the local models named in ``dora audit``'s ``argv`` before the full parser is
    built (building it imports Dagster, ~1 s): a path that does not exist exits 2 with one
    line. Flag values are checked by the parser itself (types derived from the Config fields,
    ``orchestration/cli/flags.py``). Not for ``--dry-run``, which loads no model (a model to be
    fetched later is fine there)."""
    import sys

    items = list(argv)
    if not items or items[0] != "audit" or "--dry-run" in items:
        return
    given = {}
    for i, item in enumerate(items):
        flag, eq, value = item.partition("=")
        if flag.startswith("--"):
            given[flag] = value if eq else (items[i + 1] if i + 1 < len(items) else "")
    problem = _model_problems(given)
    if problem:
        print(f"usage: dora audit ...\ndora audit: error: {problem}", file=sys.stderr)
        raise SystemExit(2)


def _model_problems(given: dict[str, str]) -> str | None:
    """The first local model named in ``given`` (flag -> value) that cannot be found."""
    from ingestion.vocabulary import DEFAULT_MODEL

    # the ad-hoc model only: a family's other model flags are checked through their Flag
    # declarations (``local_model=``) once the parser is built (orchestration/cli/flags.py)
    pairs = [("--model", "--backend", "transformers")]
    for model_flag, backend_flag, local in pairs:
        ref = given.get(model_flag)
        if not ref or ref == DEFAULT_MODEL or given.get(backend_flag, local) != local:
            continue
        if model_flag == "--model" and "--target" in given:
            continue
        problem = local_model_problem(ref, model_flag)
        if problem:
            return problem
    return None


#: Backends that load a model in this process (a model named for them must be found locally).
LOCAL_BACKENDS = ("transformers", "diffusers")


def command_parser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    """The sub-parser of ``command`` (its ``prog`` is ``dora <command>``), else ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Cross-flag checks after parsing; calls ``parser.error`` (exit 2, one line) on the first
    problem, through the command's own parser so the line reads ``dora <command>: error: ...``."""
    command = getattr(args, "command", None)
    parser = command_parser(parser, command)
    if command == "audit" and not getattr(args, "dry_run", False):  # a dry run loads no model
        from ingestion.vocabulary import DEFAULT_MODEL

        if args.backend == "transformers" and args.model != DEFAULT_MODEL and not args.target:
            problem = local_model_problem(args.model, "--model")
            if problem:
                parser.error(problem)
    if command == "models" and args.registry:  # (dora audit's --registry is a family flag declared with path=)
        problem = path_problem(args.registry, "file", "--registry")
        if problem:
            parser.error(problem)
    if command == "report" and args.out:
        out = Path(args.out).expanduser()
        if out.exists() and not out.is_dir():
            parser.error(f"--out {args.out}: is an existing file; give a folder (it is created if missing)")
        parent = next((p for p in [out, *out.parents] if p.exists()), None)
        if parent is not None and not os.access(parent, os.W_OK):
            parser.error(f"--out {args.out}: {parent} is not writable")


__all__ = [
    "LOCAL_BACKENDS",
    "audit_id",
    "base_urls",
    "check_args",
    "command_parser",
    "csv_choices",
    "float_range",
    "image_size",
    "int_range",
    "letters",
    "local_model_problem",
    "number_range",
    "path_problem",
    "precheck",
]

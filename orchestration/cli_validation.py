"""Flag validation of the ``dora`` command, at argparse level.

Every bad flag is refused by argparse itself, before Dagster (or torch, or dbt) is imported:
one line of message, exit code 2, well under a second. Two layers:

* argparse ``type=`` callables (:func:`int_range`, :func:`float_range`, :func:`csv_choices`,
  :func:`letters`, :func:`audit_id`, :func:`image_size`) for what one flag decides alone;
* :func:`check_args` for what depends on several flags (a local model named for a local
  backend must exist, except for ``dora audit --dry-run``, which loads no model) or on the file system (``--out`` must not be a file).

Each limit is generous for real use and small enough that a typo cannot exhaust the machine
(``--runs 1000000000`` would build a plan of billions of rows).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Callable, Sequence

#: Upper limits of the count flags (the paper uses 10 runs, 10 images, 364 descriptors).
MAX_RUNS = 1000
MAX_PER_DIMENSION = 10_000
MAX_BATCH = 4096
MAX_IMAGES = 1000
MAX_TOKENS = 8192
MAX_REPEATS = 100
MAX_TOP = 100_000


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


def csv_choices(choices: Sequence[str], what: str) -> Callable[[str], str]:
    """argparse type: a non-empty comma-separated subset of ``choices`` without repeats
    (returned as given, the callers split it)."""

    def parse(text: str) -> str:
        items = [p.strip() for p in text.split(",") if p.strip()]
        if not items:
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


#: The flags naming an OpenAI-compatible endpoint (each takes one URL or a comma-separated fleet).
BASE_URL_FLAGS = ("--base-url", "--t2i-base-url", "--i2t-base-url", "--judge-base-url", "--modscan-base-url",
                  "--modscan-vision-base-url", "--vlstereoset-vlm-base-url")


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
    if path.exists():
        return None
    if _looks_like_path(ref):
        return f"{flag} {ref}: no such file or folder"
    if _hub_cached(ref):
        return None
    return (
        f"{flag} {ref}: not a local folder or file, and not a hub id in the Hugging Face cache "
        "(downloads are off); give a local path, or pre-download the model"
    )


def checks() -> dict[str, Callable[[str], object]]:
    """Flag -> its argparse ``type`` check (used by the parser and by :func:`precheck`)."""
    from ingestion.vocabulary import I2T_SETTINGS, T2I_SETTINGS, T2T_SETTINGS

    return {
        "--settings": csv_choices(T2T_SETTINGS, "T2T setting"),
        "--runs": int_range(1, MAX_RUNS),
        "--letters": letters,
        "--per-dimension": int_range(0, MAX_PER_DIMENSION, " (0 = all)"),
        "--batch-size": int_range(1, MAX_BATCH),
        "--audit-id": audit_id,
        "--api-timeout": float_range(0, 3600, lo_open=True),
        "--api-concurrency": int_range(1, 256),
        "--api-max-retries": int_range(0, 20),
        "--max-error-share": float_range(0, 1),
        "--t2i-steps": int_range(1, 1000),
        "--t2i-size": image_size,
        "--t2i-settings": csv_choices(T2I_SETTINGS, "T2I setting"),
        "--images-per-descriptor": int_range(1, MAX_IMAGES),
        "--image-audit-id": audit_id,
        "--i2t-settings": csv_choices(I2T_SETTINGS, "I2T setting"),
        "--i2t-max-new-tokens": int_range(1, MAX_TOKENS),
        "--judge-repeats": int_range(1, MAX_REPEATS),
        "--top": int_range(1, MAX_TOP),
        "--port": int_range(1, 65535),
        **{flag: base_urls for flag in BASE_URL_FLAGS},  # one URL or a fleet
    }


def precheck(argv: Sequence[str]) -> None:
    """Check the values of :func:`checks`' flags in ``argv`` before the full parser is built
    (building it imports Dagster, ~1-2 s): a bad value exits 2 with argparse's one line.
    Everything else is left to the parser."""
    import sys

    if not argv:
        return
    command = argv[0] if not argv[0].startswith("-") else ""
    table = checks()
    if command == "audit":  # `dora audit --top 0` shows no associations: allowed there
        table["--top"] = int_range(0, MAX_TOP)
    items = list(argv)
    for i, item in enumerate(items):
        flag, eq, value = item.partition("=")
        if flag not in table:
            continue
        if not eq:
            if i + 1 >= len(items):
                continue  # argparse reports the missing value
            value = items[i + 1]
        try:
            table[flag](value)
        except argparse.ArgumentTypeError as exc:
            print(f"usage: dora {command} ...\ndora {command}: error: argument {flag}: {exc}".replace("dora : ", "dora: "), file=sys.stderr)
            raise SystemExit(2) from None
    # The model paths too (check_args repeats this after the full parse); not for --dry-run,
    # which prints the plan and loads no model (a model to be fetched later is fine there).
    if command == "audit" and "--dry-run" not in items:
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

    pairs = [("--model", "--backend", "transformers"), ("--t2i-model", "--t2i-backend", "diffusers"),
             ("--i2t-model", "--i2t-backend", "transformers"), ("--judge-model", "--judge-backend", "transformers")]
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


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Cross-flag checks after parsing; calls ``parser.error`` (exit 2, one line) on the first problem."""
    command = getattr(args, "command", None)
    if command == "audit" and not getattr(args, "dry_run", False):  # a dry run loads no model
        from ingestion.vocabulary import DEFAULT_MODEL

        if args.backend == "transformers" and args.model != DEFAULT_MODEL and not args.target:
            problem = local_model_problem(args.model, "--model")
            if problem:
                parser.error(problem)
        if args.t2i_model and args.t2i_backend == "diffusers":
            problem = local_model_problem(args.t2i_model, "--t2i-model")
            if problem:
                parser.error(problem)
        if args.i2t_model and args.i2t_backend == "transformers":
            problem = local_model_problem(args.i2t_model, "--i2t-model")
            if problem:
                parser.error(problem)
        if args.judge_model and args.judge_backend == "transformers" and args.judge_model != DEFAULT_MODEL:
            problem = local_model_problem(args.judge_model, "--judge-model")
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
    "BASE_URL_FLAGS", "audit_id", "base_urls", "check_args", "checks", "csv_choices", "precheck", "float_range", "image_size", "int_range", "letters", "local_model_problem",
]

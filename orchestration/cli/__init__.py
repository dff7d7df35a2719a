"""The ``dora`` command line: run audits, query associations, open the Dagster UI.

* :mod:`orchestration.cli.parser`: commands, flags and their defaults;
* :mod:`orchestration.cli.audit`: ``dora audit`` (the Dagster job ``dora_audit``, in-process
  against the instance in ``$DORA_HOME/dagster``, so every run shows up in ``dora ui``);
* :mod:`orchestration.cli.commands`: ``query``, ``tables``, ``reparse``, ``ui``, ``models``, ``diff``, ``report``, ``families``.
* :mod:`orchestration.cli.batch`: ``batches``, ``batch export`` / ``import`` (the Batch API work of ``--api-batch``).
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dora`` console script; returns the exit code.

    Flags are validated at argparse level (:mod:`orchestration.cli_validation`; types and ranges
    derived from every family's Config fields): a bad value is one line, exit 2, before any
    Dagster run, model or dbt build starts. Errors with a known cause are one line
    (``dora <command>: <cause and fix>``), never a traceback: a
    :class:`~ingestion.errors.DoraError` (exit 2), an unusable ``DORA_HOME`` or output
    path (exit 2), a failed audit step (exit 1: ``orchestration.cli.audit.failure_lines``; the
    stack traces go to a file in ``$DORA_HOME/logs``, as do those of an unexpected error of
    ``dora audit`` itself), Ctrl-C (exit 130: what landed is kept, a re-run resumes), a closed pipe
    (``dora query ... | head``: exit 0 quietly).
    """
    import sys

    from models_inference.backends.cpu_share import prefer_short_spin_openmp
    from orchestration.cli_validation import check_args, precheck

    # before anything imports torch (OpenMP reads it once): waiting threads sleep after a short
    # spin instead of a long one, which on a shared machine stalls every operation
    # (models_inference/backends/cpu_share.py); the processes dora starts (steps, the UI's code
    # servers) inherit it
    prefer_short_spin_openmp()

    items = sys.argv[1:] if argv is None else list(argv)
    problem = non_utf8_argument(items)
    if problem:  # before argparse, which would echo it, and before it reaches a message, a file name or a query
        print(problem, file=sys.stderr)
        raise SystemExit(2)
    precheck(items)
    from ingestion.errors import FamilyModuleError

    try:  # the family records (the parser's flags come from them): a bad $DORA_FAMILIES is one line
        import orchestration.families  # noqa: F401
    except FamilyModuleError as exc:
        print(f"dora: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    from orchestration.cli import audit, batch, commands
    from orchestration.cli.parser import build_parser

    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.command == "audit":  # every family's input paths, local models and settings, before Dagster
        from orchestration.cli.flags import family_problem
        from orchestration.cli_validation import command_parser

        problem = family_problem(args)
        if problem:
            command_parser(parser, "audit").error(problem)
        if args.target and not args.dry_run:  # the target checked like its flags (a dry run checks it as it plans)
            from orchestration.cli.target import target_problem

            problem = target_problem(args)
            if problem:
                print(f"dora audit: error: {problem}", file=sys.stderr)
                return 2
    handler = {
        "audit": audit.cmd_audit,
        "report": commands.cmd_report,
        "query": commands.cmd_query,
        "tables": commands.cmd_tables,
        "reparse": commands.cmd_reparse,
        "ui": commands.cmd_ui,
        "models": commands.cmd_models,
        "diff": commands.cmd_diff,
        "families": commands.cmd_families,
        "batches": batch.cmd_batches,
        "batch": batch.cmd_batch,
    }[args.command]
    return call_reporting_errors(handler, args)


#: The commands, for the name a refused argument's line starts with (``dora report: ...``).
_COMMANDS = ("audit", "report", "query", "tables", "reparse", "ui", "models", "diff", "families", "batches", "batch")


def non_utf8_argument(argv: list[str]) -> str | None:
    """The one-line refusal of the first argument that is not UTF-8 text, or ``None``.

    Python decodes an argument's undecodable bytes (``b"\\xff"``) to lone surrogates
    (``"\\udcff"``): printing one, encoding it for a DuckDB query or a file name fails deep
    inside a command with a traceback. Checked once here for every command, like ``dora query``
    refuses such SQL; the line names the flag (or the argument's position) and the byte.
    """
    from ingestion.errors import shown

    for i, item in enumerate(argv):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as exc:
            name = f"dora {argv[0]}" if argv and argv[0] in _COMMANDS else "dora"
            flag, eq, _ = item.partition("=")
            if eq and flag.startswith("--"):
                what = flag
            elif i > 0 and argv[i - 1].startswith("--"):
                what = argv[i - 1]
            else:
                what = f"argument {i + 1}"
            byte = item[exc.start].encode("utf-8", "surrogateescape")
            return (
                f"{name}: error: {shown(what)}: {shown(item, quote=True)} is not valid UTF-8 text (byte "
                f"0x{byte.hex() if len(byte) == 1 else '??'} at position {exc.start}); pass UTF-8 text"
            )
    return None


def call_reporting_errors(handler, args) -> int:
    """``handler(args)``, with known failures as one line on stderr (see :func:`main`)."""
    import contextlib
    import os
    import sys

    name = f"dora {args.command}"
    _landing_warnings_on_one_line()
    try:
        return handler(args)
    except KeyboardInterrupt:
        print(f"\n{name}: interrupted; everything that landed is kept: run the same command again to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader (head, less) went away: not an error
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - known causes become one line, the rest re-raised
        line = one_line_error(exc)
        if line is None:
            if args.command != "audit":
                raise
            # an audit's unexpected failure outside its steps: one line, the trace to a file
            log = _write_trace(exc)
            print(f"{name}: error: unexpected {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}; full trace: {log}", file=sys.stderr)
            return 1
        print(f"{name}: {line}", file=sys.stderr)
        return 2


def _write_trace(exc: BaseException) -> str:
    """Write ``exc``'s traceback to ``$DORA_HOME/logs/audit-crash-<UTC time>.log`` (the temp
    folder when the home cannot be written); returns the file's path."""
    import os
    import tempfile
    import traceback
    from datetime import datetime, timezone
    from pathlib import Path

    text = "".join(traceback.format_exception(exc))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    for folder in (Path(os.environ.get("DORA_HOME", "data")).expanduser() / "logs", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"audit-crash-{stamp}.log"
            path.write_text(text, encoding="utf-8")
            return str(path)
        except OSError:
            continue
    return "(no writable folder for the trace)"


def one_line_error(exc: BaseException) -> str | None:
    """The one-line message of an error with a known cause, else ``None``."""
    import os
    from pathlib import Path

    from ingestion.errors import DoraError, shown

    if isinstance(exc, DoraError):
        return str(exc)
    if isinstance(exc, UnicodeError):
        return f"invalid text (not UTF-8): {getattr(exc, 'reason', exc)}; pass UTF-8 text"
    if isinstance(exc, OSError) and exc.filename is not None:
        home = os.environ.get("DORA_HOME", "data")
        fix = "point DORA_HOME at a writable folder" if str(exc.filename).startswith(str(Path(home).expanduser())) else "check the path"
        return f"{shown(exc.filename)}: {exc.strerror or exc} ({fix})"
    try:
        import duckdb
    except ImportError:  # pragma: no cover
        return None
    if isinstance(exc, duckdb.Error) and "lock" in str(exc).lower():
        return f"the warehouse is busy (another process is writing it): try again in a few seconds ({str(exc).splitlines()[0]})"
    return None


def _landing_warnings_on_one_line() -> None:
    """Print a quarantined shard's warning as ``dora: <message>``, one line: the message names
    the shard, the reason and where it was moved; Python's default adds the source line of the
    ``warnings.warn`` call. Matched by name, so ``ingestion`` (pyarrow) is not imported here."""
    import warnings

    default = warnings.formatwarning

    def formatwarning(message, category, filename, lineno, line=None):
        if category.__name__ == "LandingSchemaWarning":
            return f"dora: {message}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning

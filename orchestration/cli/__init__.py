"""The ``dora`` command line: run audits, query associations, open the Dagster UI.

* :mod:`orchestration.cli.parser`: commands, flags and their defaults;
* :mod:`orchestration.cli.audit`: ``dora audit`` (the Dagster job ``dora_audit``, in-process
  against the instance in ``$DORA_HOME/dagster``, so every run shows up in ``dora ui``);
* :mod:`orchestration.cli.commands`: ``query``, ``ui``, ``models``, ``diff``, ``report``.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dora`` console script; returns the exit code."""
    from orchestration.cli import audit, commands
    from orchestration.cli.parser import build_parser

    args = build_parser().parse_args(argv)
    handler = {
        "audit": audit.cmd_audit,
        "report": commands.cmd_report,
        "query": commands.cmd_query,
        "ui": commands.cmd_ui,
        "models": commands.cmd_models,
        "diff": commands.cmd_diff,
    }[args.command]
    return handler(args)

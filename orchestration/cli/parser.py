"""The ``dora`` argument parser: every command, flag and default of the CLI.

Probe and scoring flags come from the families (:data:`orchestration.families.FAMILIES`):
their defaults from the Dagster Config classes and the paper constants next to each
family's prompts, never restated here. ``dora audit --help`` shows the common flags, the flags
several families share (``--model``, ``--backend``, ...) and the family list; ``dora audit
--help-family NAME`` one family's flags and the shared ones it uses (every flag parses either way).
"""

from __future__ import annotations

import argparse

from orchestration import families as fam
from orchestration.cli.flags import add_all_family_flags, add_common_flags, select_families
from orchestration.cluster import BROKER_ENV, DEFAULT_BROKER, DEFAULT_WORKER_TIMEOUT, EXECUTORS
from orchestration.defaults import MAX_TOP  # the count flags of the commands (the others: on the Config fields)
from orchestration.deprecation import add_deprecated, old_names

EPILOG = """\
environment:
  DORA_HOME   where the warehouse (warehouse.duckdb), landing Parquet and the Dagster
              instance live (default: ./data)

examples:
  dora audit                                  # quick audit, embedded SmolLM2-135M (offline)
  dora audit --per-dimension 0 --runs 10      # paper scale: 406 descriptors x 5 x 26 x 10
  dora audit --descriptors "alcoholic person,child" --settings singular,verb
  dora audit --backend openai --model gpt-4o --prompt-style chat   # needs OPENAI_API_KEY
  dora query "select * from fct_associations where is_significant order by fisher_q limit 20"
  dora ui                                     # Dagster UI with lineage and Dagster runs
  dora report                                 # HTML + PNGs: % negative, % toxic, judge bias levels
  dora audit --judge-backend openai --judge-model gpt-4o --judge-runs 3   # paper judge; needs OPENAI_API_KEY
  dora audit --t2i-model ./sd --i2t-model ./llava   # T2I + I2T probes with local diffusers / transformers folders
  dora audit --t2i-backend openai --t2i-model dall-e-3 --i2t-backend openai --i2t-model gpt-4o
  dora audit --family vlstereoset --vlstereoset-csv VLStereoSet.csv --images ./imgs --vlstereoset-clip-model ./clip
  dora diff HuggingFaceTB/SmolLM2-135M-Instruct --family vlstereoset  # vlrs / vlbs change tests between two versions
  dora families                               # the probe families: group, flags, landing tables, marts
  dora audit --help-family modscan            # one family's flags
  dora models list                            # registry targets, current version, last audit
  dora audit --target smollm2-135m            # audit a registry target's current version
  dora diff smollm2-135m                      # latest audit vs the previous one, per bias dimension
"""


MODELS_LIST_DESCRIPTION = (
    "List the audit registry's targets (registry.yaml or $DORA_REGISTRY): modality, backend, "
    "model, how the version is read, the current version and the last audit in the warehouse."
)


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose error stays one line when a value in it holds a newline (a path): its
    characters that are not printable are written escaped, and a value too long to read back
    (``unrecognized arguments: <100 kB>``) is cut; an old flag name given with its new one is
    refused. Sub-parsers are of the same class."""

    #: what a sub-parser derives from its parsed arguments, once (``dora audit``'s selected
    #: families: ``orchestration.cli.flags.select_families``)
    after_parse = None

    def error(self, message: str):
        import re

        from ingestion.errors import MAX_SHOWN, one_line, shown

        super().error(re.sub(rf"\S{{{MAX_SHOWN + 1},}}", lambda m: shown(m.group()), one_line(message)))

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, after refusing an old flag name given with its new one (one line, exit 2):
        each sub-parser checks its own options, on the arguments it is given."""
        import sys

        from orchestration.deprecation import old_and_new_given

        problem = old_and_new_given(self, sys.argv[1:] if args is None else list(args))
        if problem:
            self.error(problem)
        parsed, rest = super().parse_known_args(args, namespace)
        if self.after_parse is not None:
            self.after_parse(parsed)
        return parsed, rest


def build_parser() -> argparse.ArgumentParser:
    """The ``dora`` parser: one sub-command per entry of :data:`_COMMAND_PARSERS`, in ``--help`` order."""
    parser = _OneLineParser(
        prog="dora",
        description="dora audits language and vision-language models for hidden biased associations "
        "(BiasDora method: CrowS-Pairs descriptors, probes, tf-idf, Fisher's exact test, q-values).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in _COMMAND_PARSERS:
        add(sub)
    return parser


def _add_query_parser(sub) -> None:
    """``dora query SQL``: read-only SQL on the warehouse."""
    from orchestration import cli_validation as v

    query = sub.add_parser(
        "query",
        help="run read-only SQL on the warehouse",
        description="Run read-only SQL (SELECT/WITH/SHOW/DESCRIBE/EXPLAIN) on $DORA_HOME/warehouse.duckdb. "
        "What is there: `dora tables` lists the public relations per family with one line each, "
        "`dora tables NAME` their columns with descriptions; in SQL, SHOW TABLES lists every relation and "
        "DESCRIBE <table> its columns and types. Descriptors, words and bias dimensions are stored lower-case; "
        "per-dimension counts come from fct_association_dimensions (a descriptor counts in each of its dimensions).",
        epilog='examples:\n  dora tables\n  dora tables fct_association_dimensions\n  dora query "SHOW TABLES"\n'
        '  dora query "DESCRIBE fct_associations"\n'
        '  dora query "select bias_dimension, count(*) filter (where is_significant) from fct_association_dimensions group by 1"',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("sql", help="the SQL to run")
    query.add_argument("--format", "-f", default="table", choices=["table", "csv", "json"])
    query.add_argument(
        "--timeout", type=v.float_range(0, 86400), default=300.0, metavar="SECONDS", help="stop the query after SECONDS (0: no limit; default: 300)"
    )


def _add_tables_parser(sub) -> None:
    """``dora tables [NAME]``: the public relations, or one relation's columns."""
    tables = sub.add_parser(
        "tables",
        help="list the public relations (per family, one line each) or one relation's columns",
        description="List the warehouse's public relations (the dbt marts: fct_*, agg_*, dim_*) grouped by probe "
        "family, with the first sentence of each one's dbt description (dbt_project/models/**/*.yml); with NAME, "
        "NAME's columns, their DuckDB types (when built) and descriptions.",
    )
    tables.add_argument("name", nargs="?", default=None, help="a relation: list its columns")
    tables.add_argument("--all", action="store_true", help="also the staging and intermediate models (not public: may change)")


def _add_reparse_parser(sub) -> None:
    """``dora reparse``: a family's landed raw outputs re-read with its current parser."""
    reparse = sub.add_parser(
        "reparse",
        help="re-read landed raw model outputs with the current parser (no model call)",
        description="Re-parse the landed T2T completions (raw outputs) with the current parser "
        "(models_inference/probes/biasdora/parsing.py) without calling any model, and land a corrected row for every "
        "completion that now parses differently (append-only: the next dbt build keeps the re-parsed row). "
        "--build runs that dbt build now. Error rows (failed calls) are not re-parsed; I2T description words are "
        "split in dbt, so any build re-reads them.",
    )
    reparsers = [f.name for f in fam.FAMILIES if f.reparse is not None]
    reparse.add_argument(
        "--family",
        dest="family",
        default=reparsers[0],
        choices=reparsers,
        help=f"probe family whose landed outputs are re-parsed (the families with a re-parser: {', '.join(reparsers)}; default: {reparsers[0]})",
    )
    add_deprecated(reparse, old_names("--family"), "--family", "family", choices=reparsers)
    reparse.add_argument("--audit-id", default=None, help="only this audit (default: every audit in the landing zone)")
    reparse.add_argument("--build", action="store_true", help="then rebuild stg_t2t_completions and every model downstream of it (dbt build)")


def _add_ui_parser(sub) -> None:
    """``dora ui``: the Dagster UI on this ``DORA_HOME``."""
    from orchestration import cli_validation as v

    ui = sub.add_parser(
        "ui",
        help="start the Dagster UI (dagster dev) on this DORA_HOME",
        description="Start the Dagster UI (dagster dev) on the Dagster instance of this DORA_HOME: the asset "
        "lineage (one group per probe family and the shared group 'audits'), every Dagster run of an audit with its dora/* "
        "tags, the audit partitions. Ctrl-C or SIGTERM stops it and every process it started within seconds. "
        "Tour: docs/operations.md#the-ui-tour",
    )
    ui.add_argument("--port", type=v.int_range(1, 65535), default=3000, metavar="PORT", help="TCP port the UI listens on, 1..65535 (default: 3000)")
    ui.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="HOST",
        help="address to listen on; 0.0.0.0 serves other machines too (default: 127.0.0.1, this machine only)",
    )


def _add_report_parser(sub) -> None:
    """``dora report``: the HTML report."""
    from orchestration import cli_validation as v

    report = sub.add_parser(
        "report",
        help="write the HTML report (and PNGs) of sentiment, toxicity and judge bias levels",
        description="Write an HTML report with the paper-style views (BiasDora Figures 3, 4, 6, 7) from "
        "agg_bias_by_dimension and fct_association_scores: heatmaps of % negative and % toxic by setting x "
        "bias dimension per model, the Likert distribution per bias dimension, and the most toxic / "
        "highest-rated associations.",
    )
    report.add_argument("--audit-id", default=None, help="only this audit (default: every audit in the warehouse)")
    report.add_argument("--out", default=None, help="output folder (default: $DORA_HOME/reports/<audit or 'all'>)")
    report.add_argument("--top", type=v.int_range(1, MAX_TOP), default=15, help="rows of the most toxic / highest-rated tables (default: 15)")


def _add_models_parser(sub) -> None:
    """``dora models list``: the audit registry's targets."""
    models = sub.add_parser("models", help="the audit registry: registered targets and their last audit")
    models_list = models.add_subparsers(dest="models_command", required=True).add_parser(
        "list",
        help="list registry targets with their current model version and last audit",
        description=MODELS_LIST_DESCRIPTION,
    )
    models_list.add_argument("--registry", default=None, help="registry file (default: $DORA_REGISTRY or registry.yaml)")
    models_list.add_argument("--no-resolve", action="store_true", help="do not read current versions (no hashing, no API call)")
    models_list.add_argument("--format", "-f", default="table", choices=["table", "csv", "json"])


def _add_diff_parser(sub) -> None:
    """``dora diff TARGET``: two audits of a target compared (``--family``: a family's change tests)."""
    from analytics.family_diff import family_help  # dora diff --family: one line per family
    from orchestration import cli_validation as v

    diff = sub.add_parser(
        "diff",
        epilog=family_help(fam.change_tests(), [(f.name, f.diff_help) for f in fam.FAMILIES if f.diff_help]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="what changed between two audits of a registry target",
        description="Compare two finished audits of a target (default: the latest vs the previous one) on the\n"
        "probe rows both probed (fct_audit_comparisons: which rows, which were left out; audits with no row in\n"
        "common are refused) from fct_association_changes: how many associations changed significantly\n"
        "(two-sided Fisher change test, BH change q < 0.05), counts of new / gone / strengthened / weakened /\n"
        "unchanged, the associations whose significance flipped, the parse-rate change on the common rows\n"
        "(exact McNemar), the smallest detectable change (power 80%), a line per bias dimension and the top\n"
        "significant changes per bias dimension, ranked by change q. --family: another probe family's change\n"
        "tests (below), on the units both audits have (none in common: refused too). A refusal, an unknown\n"
        "target or audit is one line, exit 2.",
    )
    diff.add_argument(
        "target", help="registry target name (ad-hoc audits: the model id); with another --family: the model id, or its last path component"
    )
    diff.add_argument("--from", dest="from_ref", default=None, help="earlier audit: audit id or model version (default: the audit before --to)")
    diff.add_argument("--to", dest="to_ref", default=None, help="later audit: audit id or model version (default: the latest)")
    diff.add_argument(
        "--top",
        type=v.int_range(1, MAX_TOP),
        default=5,
        help="significant changes shown per bias dimension (smallest change q first; default: 5); flipped associations: up to twice as many",
    )
    diff.add_argument(
        "--format",
        "-f",
        default="table",
        choices=["table", "csv", "json"],
        help="table: the report; json: the whole result (header, compared rows, counts, flips, parse-rate tests, power, "
        "per-dimension lines, top changes, notes, verdict); csv: the same flattened to path,value rows",
    )
    diff.add_argument(
        "--fail-on",
        dest="fail_on",
        default=None,
        choices=["change", "collapse"],
        help="exit 1 when the verdict is a collapse (collapse), or a change or a collapse (change); "
        "exit 0 otherwise, 2 on a refusal or an error (docs/cli.md#dora-diff)",
    )
    add_deprecated(diff, old_names("--family"), "--family", "family", choices=fam.family_names())
    diff.add_argument(
        "--family",
        dest="family",
        default=fam.FAMILIES[0].name,
        choices=fam.family_names(),
        help=f"probe family compared: the default, {fam.FAMILIES[0].name}, is the comparison described above; "
        "any other: its change tests on the units both audits have, sorted by change q (the table lists "
        "every significant change and at least --top rows; see below)",
    )


def _add_families_parser(sub) -> None:
    """``dora families``: the probe families and what they write."""
    families = sub.add_parser(
        "families",
        help="list the probe families: Dagster group, flags, landing tables, marts",
        description="List every probe family dora hosts (orchestration/families.py): its Dagster asset group, its "
        "dora audit flag prefix, the landing tables it writes and the marts dbt builds from them.",
    )
    families.add_argument("--format", "-f", default="table", choices=["table", "csv", "json"])


def _add_batch_parsers(sub) -> None:
    """``dora batches``, ``dora batch export`` / ``import`` (their module builds them)."""
    from orchestration.cli.batch import add_batch_parsers

    add_batch_parsers(sub)


AUDIT_DESCRIPTION = (
    "Run the whole audit chain as the Dagster job 'dora_audit' and print a summary. Re-running the same audit "
    "generates only rows that have not landed yet."
)


def _family_list() -> str:
    lines = ["probe families (dora audit --help-family NAME shows a family's flags):"]
    lines += [f"  {f.name:<15}{f.title}" for f in fam.FAMILIES]
    return "\n".join(lines)


class _HelpFamily(argparse.Action):
    """``--help-family NAME``: print ``dora audit``'s help with that family's flags, exit 0."""

    def __call__(self, parser, namespace, values, option_string=None):
        helper = argparse.ArgumentParser(prog=parser.prog, description=AUDIT_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
        add_audit_arguments(helper, shown=values)
        helper.print_help()
        parser.exit()


def add_audit_parser(sub) -> argparse.ArgumentParser:
    """The ``dora audit`` subparser: the common flags, ``--family``, the flags several families
    share, and every family's own flags (shown by ``--help-family NAME`` only)."""
    audit = sub.add_parser(
        "audit",
        help="run a full audit: every probe family (or those of --family) -> their marts",
        description=AUDIT_DESCRIPTION,
        epilog=_family_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_audit_arguments(audit, shown=None)
    return audit


def add_audit_arguments(audit: argparse.ArgumentParser, shown: str | None) -> None:
    """Every ``dora audit`` argument; only family ``shown``'s flags appear in the help."""
    from orchestration import cli_validation as v

    names = fam.family_names()
    audit.add_argument(
        "--family",
        action="append",
        default=None,
        choices=names,
        metavar="NAME",
        help=f"probe family to run, repeatable: {', '.join(names)} (default: every family)",
    )
    add_deprecated(audit, old_names("--family"), "--family", "family", append=True, choices=names)
    audit.after_parse = select_families
    audit.add_argument("--help-family", action=_HelpFamily, choices=names, metavar="NAME", help="show the flags of one probe family and exit")
    seen = add_common_flags(audit)
    audit.add_argument("--top", type=v.int_range(0, MAX_TOP), default=3, help="top associations shown per bias dimension (default: 3)")
    audit.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="show dbt's output (otherwise in $DORA_HOME/logs/last_audit_dbt.log) and Dagster's tracebacks "
        "(a failed Dagster run's traces are always in $DORA_HOME/logs/audit-<run id>.log)",
    )
    audit.add_argument(
        "--rebuild",
        action="store_true",
        help="re-extract descriptors and recompute every dbt model from the landing zone (dbt --full-refresh; "
        "audits whose shards were archived leave the marts) even when nothing new landed (otherwise both are skipped then)",
    )
    audit.add_argument(
        "--executor",
        default="in_process",
        choices=list(EXECUTORS),
        help="in_process (default): every step in this process; multiprocess: each step in its own "
        "process (Dagster's multiprocess executor), as Dagster runs launched from the UI; celery: each step on a "
        "Celery worker (`dagster-celery worker start`, docs/operations.md#running-on-a-cluster)",
    )
    audit.add_argument(
        "--celery-broker",
        default=None,
        metavar="URL",
        type=v.celery_broker,
        help=f"Celery broker and result backend of --executor celery: a redis://, rediss://, amqp://, sqs:// ... URL "
        f"(default: ${BROKER_ENV}, else {DEFAULT_BROKER})",
    )
    audit.add_argument(
        "--celery-worker-timeout",
        default=DEFAULT_WORKER_TIMEOUT,
        metavar="SECONDS",
        type=v.float_range(0, 86400),
        help=f"--executor celery: seconds to wait for a Celery worker to answer on the broker before failing with "
        "one line (0: no limit); after ~2 s without one it says it is waiting. During the Dagster run, the same bound for a "
        "worker that stops answering while it holds a step (the step fails as lost) or for no worker at all "
        f"(docs/operations.md#celery-workers) (default: {DEFAULT_WORKER_TIMEOUT:.0f})",
    )
    audit.add_argument(
        "--dry-run",
        action="store_true",
        help="print every family's plan (prompts / queries / items, rows already landed where known, estimated time) "
        "without loading any model or running anything; with --target, the plans of that target's families on its "
        "model, version, settings and options, after the checks its real Dagster run gets; with --api-batch, the batch "
        "files, requests and prompt tokens per step",
    )
    audit.add_argument(
        "--target",
        default=None,
        metavar="NAME",
        help="audit this registry target's current version (partition <target>@<version>) with the "
        "families it lists (--family narrows them); its registry settings replace the probe flags and "
        "are checked as those flags would be before Dagster starts (one line, exit 2)",
    )
    add_all_family_flags(audit, seen, shown=shown)


#: the sub-commands, in ``dora --help`` order
_COMMAND_PARSERS = (
    add_audit_parser,
    _add_query_parser,
    _add_tables_parser,
    _add_reparse_parser,
    _add_ui_parser,
    _add_report_parser,
    _add_models_parser,
    _add_diff_parser,
    _add_families_parser,
    _add_batch_parsers,
)

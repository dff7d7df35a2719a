"""``dora batches`` and ``dora batch export`` / ``import``: an audit's Batch API work, and the
same JSONL files for offline runners (vLLM's ``vllm run-batch``); the ``--api-batch`` lines
of ``dora audit --dry-run`` (files, requests and prompt tokens per step, before anything is sent).

Every step that runs in batch mode keeps a ledger (:mod:`models_inference.backends.batch_ledger`):
``dora batches`` lists its files and batches with their state and counts (asking the API for
the counts of the open ones), and ``--cancel`` cancels them. ``dora batch export`` writes the
requests of an audit's rows not yet landed (the flags of ``dora audit``) as JSONL files and
records them; ``dora batch import`` lands a runner's output file as the audit's rows, each file
once, rebuilding the step from what its ledger recorded (docs/operations.md#batch-apis).

The steps come from the families (:attr:`orchestration.family.ProbeFamily.batch_steps`, in
:data:`orchestration.families.FAMILIES` order): this module names none.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from orchestration import families as fam
from orchestration.deprecation import add_deprecated, old_names


def batch_steps(families=None) -> list[tuple[object, object]]:
    """``(family, step)`` of every :class:`~orchestration.family.BatchStep` of every family of
    ``families`` (default :data:`~orchestration.families.FAMILIES`), in their order."""
    return [(f, step) for f in (fam.FAMILIES if families is None else families) for step in f.batch_steps]


def export_families() -> list[str]:
    """The families ``dora batch export --family`` takes: those with a step it can write (the
    first is the default)."""
    return list(dict.fromkeys(f.name for f, step in batch_steps() if step.work is not None))


def _exported() -> str:
    return " or ".join(f"{name} ({', '.join(s.title for f, s in batch_steps() if f.name == name and s.work)})" for name in export_families())


BATCHES_DESCRIPTION = (
    "List the Batch API work of audits run with --api-batch (or written by `dora batch export`): one line per "
    "file of requests, with its batch id, its state in dora's ledger (prepared, uploaded, submitted, landing, "
    "exported, closed), the batch's status at the API and its request counts (asked of the API for the open "
    "batches unless --no-refresh; needs the key variable the audit used). --cancel cancels an audit's open "
    "batches and closes its other open or stuck files (not sent, exported, stuck while landing, lost at the API): its "
    "next Dagster run lands what ran and sends the rest again. A ledger file that cannot be read is named, one line each (exit 1)."
)
EXPORT_DESCRIPTION = (
    "Write the requests of an audit's rows not yet landed as JSONL files in the OpenAI Batch API's format "
    "(one line per request, its custom_id naming the audit, the file and the line; at most --api-batch-max-requests requests and "
    "200 MB per file) for an offline runner such as vLLM's `vllm run-batch -i FILE -o OUTPUT --model MODEL`. "
    "Takes the flags of `dora audit` (--model is the name the runner serves; the audit is the one of "
    "`dora audit --backend openai --model MODEL`); --family {probes}, the first the default. vLLM's run-batch "
    "takes chat requests only (/v1/chat/completions): a completion-style export for it is refused (--runner openai "
    "writes /v1/completions files for a host that takes them). The files are "
    "recorded in the audit's ledger: their rows go into no other batch until `dora batch import` lands the "
    "output (or `dora batches AUDIT --cancel`)."
)
IMPORT_DESCRIPTION = (
    "Land an offline runner's output file (the Batch API's output format: custom_id, response.status_code, "
    "response.body) as the audit's rows, each exported file once: answers with their parse status, failed "
    "requests as 'error' rows; requests missing from the output go back to the pool (the next export or audit "
    "sends them again); a line of another shape (cut short, a custom_id that is not a string...) is quarantined "
    "with its line number (landing/input_quarantine) and the rest lands. The output lands only in the audit and "
    "file its custom_ids name, answered by the model they asked: any other output is refused in one line; an "
    "output already landed lands nothing. Then `dora audit` with the same flags builds the marts without calling any model."
)


def add_batch_parsers(sub) -> None:
    """Add ``dora batches`` and ``dora batch export`` / ``import`` to the ``dora`` sub-parsers."""
    from orchestration.cli.flags import add_all_family_flags, add_common_flags

    batches = sub.add_parser(
        "batches", help="list an audit's Batch API batches with their state and counts, or cancel them", description=BATCHES_DESCRIPTION
    )
    batches.add_argument(
        "name",
        nargs="?",
        default=None,
        metavar="AUDIT_ID",
        help="an audit id (or a judge's ledger, judge--...); default: every ledger of this DORA_HOME",
    )
    batches.add_argument("--cancel", action="store_true", help="cancel the open batches of AUDIT_ID (and close its files not yet sent)")
    batches.add_argument("--no-refresh", action="store_true", help="show the ledger as recorded: no API call")
    batches.add_argument("--format", "-f", default="table", choices=["table", "csv", "json"])

    batch = sub.add_parser(
        "batch",
        help="export an audit's requests as JSONL for an offline runner (vLLM run-batch); import its output",
        description="The Batch API's JSONL format for offline runners: `dora batch export` writes an "
        "audit's requests, `dora batch import` lands the runner's output (docs/operations.md#batch-apis).",
    )
    commands = batch.add_subparsers(dest="batch_command", required=True)
    export = commands.add_parser(
        "export", help="write an audit's missing requests as JSONL files", description=EXPORT_DESCRIPTION.format(probes=_exported())
    )
    export.add_argument("--out", required=True, metavar="FOLDER", help="where the JSONL files are written (created)")
    names = export_families()
    export.add_argument(
        "--family",
        action="append",
        default=None,
        choices=names,
        metavar="NAME",
        help=f"the family whose steps to export, repeatable: {', '.join(names)} (default: {names[0]})",
    )
    add_deprecated(export, old_names("--family"), "--family", "family", append=True, choices=names)
    export.add_argument(
        "--runner",
        default="vllm",
        choices=["vllm", "openai"],
        help="the runner the files are for: vllm (run-batch: chat requests only) or openai (a host of the Batch API's "
        "format: chat and text completions)",
    )
    seen = add_common_flags(export)
    add_all_family_flags(export, seen, shown=None)
    imp = commands.add_parser("import", help="land a runner's output JSONL file as an audit's rows", description=IMPORT_DESCRIPTION)
    imp.add_argument("output", metavar="OUTPUT", help="the runner's output file (JSONL)")
    imp.add_argument("--audit", default=None, metavar="AUDIT_ID", help="refuse the output unless it answers a file exported for this audit")


# ----------------------------------------------------------------------------- steps from their config


def _step(kind: str, families=None):
    """``(family, step)`` whose :attr:`~orchestration.family.BatchStep.step` is ``kind``, else ``None``."""
    return next(((f, s) for f, s in batch_steps(families) if s.step == kind), None)


def work_from_ledger(ledger, families=None):
    """Rebuild the step a ledger belongs to from what it recorded (``meta.record``: the step's
    kind, its run config, model version and target), through the family of ``families``
    (default :data:`~orchestration.families.FAMILIES`) that declares the step.

    Raises:
        BatchError: the ledger records no step ``dora batch import`` can rebuild (one without
            ``work``, such as BiasDora's judge, lands through the audit's own step).
    """
    from ingestion.errors import BatchError

    record = ledger.meta.get("record") or {}
    kind, config = record.get("step"), record.get("config") or {}
    options = {"model_version": record.get("model_version"), "target": record.get("target"), "api_key_env": ledger.meta.get("api_key_env")}
    found = _step(kind, families)
    if found is None or found[1].work is None:
        raise BatchError(
            f"ledger {ledger.name!r} records step {kind!r}, which `dora batch import` cannot rebuild (its "
            "batches land through `dora audit --api-batch`)"
        )
    family, step = found
    return step.work(family.configs[step.op](**config), **options)


def _batch_options(config, step: str, work, runner: str = "vllm"):
    from models_inference.backends.batch_requests import BatchOptions

    return BatchOptions(
        max_requests=config.api_batch_max_requests,
        retries=config.api_batch_retries,
        token_field="max_tokens" if runner == "vllm" else None,
        record={"step": step, "config": config.model_dump(mode="json"), "model_version": work.backend.model_version, "target": None},
    )


def export_configs(args) -> list[tuple[object, object]]:
    """``(step, config)`` of each :class:`~orchestration.family.BatchStep` ``dora batch export``
    writes, from its ``dora audit`` flags: every step with ``work`` of the ``--family`` families
    (default: the first of :func:`export_families`); the backend is ``openai`` (the requests are
    in the OpenAI format)."""
    from orchestration.cli.flags import op_run_configs, select_families

    probes = list(dict.fromkeys(args.family or export_families()[:1]))
    export = argparse.Namespace(**{**vars(args), "family": probes})
    select_families(export)
    ops = op_run_configs(export)
    return [(step, ops[step.op].model_copy(update={"backend": "openai"})) for f, step in batch_steps() if f.name in probes and step.work is not None]


# ----------------------------------------------------------------------------- commands


def cmd_batches(args) -> int:
    """``dora batches [AUDIT_ID] [--cancel]``: the ledgers' files and batches, or cancel one audit's."""
    from analytics.query import QueryResult, format_result
    from ingestion.errors import BatchError, ModelNotAvailableError
    from models_inference.backends.batch_ledger import ledger_names, ledger_path, load_ledger, unreadable_ledgers
    from models_inference.backends.batch_tools import cancel_ledger, refresh_ledger
    from orchestration.instance import prepare_environment

    prepare_environment(dagster=False)
    names = ledger_names()
    unreadable = unreadable_ledgers()
    for problem in unreadable:  # a ledger that cannot be read may hold submitted batches: never skipped silently
        print(f"dora batches: {problem}", file=sys.stderr)
    if args.name is not None and not ledger_path(args.name).exists():
        import difflib

        close = difflib.get_close_matches(args.name, names, n=3)
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else (f"; ledgers: {', '.join(names[:5])}" if names else "; no audit has run with --api-batch here")
        )
        print(f"dora batches: no batch ledger for {args.name!r} in $DORA_HOME/state/batches{hint}", file=sys.stderr)
        return 2
    if args.name is not None and args.name not in names:  # its file cannot be read: named above, once
        return 1
    if args.cancel:
        if args.name is None:
            print("dora batches: --cancel needs the AUDIT_ID whose batches to cancel (dora batches lists them)", file=sys.stderr)
            return 2
        acted = cancel_ledger(args.name)
        for e in acted:
            what = f"batch {e.batch_id}: {e.status}" if e.state == "submitted" else f"file {e.id}: closed ({e.error or 'not sent'})"
            print(f"dora batches: {args.name}: {what} ({e.requests:,} requests)")
        if not acted:
            print(f"dora batches: {args.name}: no open batch to cancel")
        else:
            print("dora batches: run the audit again to land what ran; the rest goes into new batches")
        return 0
    rows = []
    for name in [args.name] if args.name is not None else names:
        try:
            ledger = load_ledger(name) if args.no_refresh else refresh_ledger(name)
        except (ModelNotAvailableError, BatchError) as exc:  # the ledger alone still says what was sent
            print(f"dora batches: {name}: counts as recorded (not asked of the API: {exc})", file=sys.stderr)
            ledger = load_ledger(name)
        for e in ledger.entries:
            rows.append((name, e.id, e.batch_id or "", e.state, e.status or "", e.requests, e.completed, e.failed, e.landed, e.not_run, e.updated_at))
    if not rows:
        if not unreadable:
            print("dora batches: no batch yet (dora audit --api-batch, dora batch export)", file=sys.stderr)
        return 1 if unreadable else 0
    columns = ["ledger", "file", "batch", "state", "status", "requests", "completed", "failed", "landed", "not_run", "updated"]
    print(format_result(QueryResult(columns, rows), args.format))
    return 1 if unreadable else 0


def cmd_batch(args) -> int:
    """``dora batch export`` / ``import``."""
    from orchestration.instance import prepare_environment

    prepare_environment(dagster=False)
    return _export(args) if args.batch_command == "export" else _import(args)


def _export(args) -> int:
    from models_inference.backends.batch_tools import export_batched

    out = Path(args.out).expanduser().resolve()
    written = 0
    runner = getattr(args, "runner", "vllm")
    for step, config in export_configs(args):
        work = step.work(config)
        entries = export_batched(work, _batch_options(config, step.step, work, runner), out, runner=runner)
        if not entries:
            print(f"dora batch export: {work.step}, audit {work.name}: nothing to export (every row has landed or is in an open batch: dora batches)")
            continue
        print(f"dora batch export: {work.step}, audit {work.name}: {sum(e.requests for e in entries):,} requests in {len(entries)} file(s)")
        for e in entries:
            print(f"  {e.path} ({e.requests:,} requests, {e.endpoint})")
            if runner == "vllm":
                print(f"    vllm run-batch -i {e.path} -o {e.path[: -len('.jsonl')]}.output.jsonl --model {config.model}")
        written += len(entries)
    if written:
        print(
            "dora batch export: then: dora batch import <output file> (each), and `dora audit` with the same flags "
            "(--backend openai) builds the marts"
        )
    return 0


def _import(args) -> int:
    from ingestion.errors import InputFileError
    from ingestion.input_paths import path_problem
    from ingestion.quarantine import read_input_bytes
    from models_inference.backends.batch_lines import read_output
    from models_inference.backends.batch_tools import import_batched, output_owner

    path = Path(args.output).expanduser()
    problem = path_problem(path, "file", "OUTPUT")  # a FIFO would block the read for ever
    if problem:
        print(f"dora batch import: {problem}", file=sys.stderr)
        return 2
    try:
        text = read_input_bytes(path, "the batch output").decode("utf-8")
    except (InputFileError, UnicodeDecodeError) as exc:
        print(f"dora batch import: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    lines, bad = read_output(text)
    if not lines:
        why = f"; line {bad[0].line}: {bad[0].reason}" if bad else ""
        print(f"dora batch import: {path} holds no output line{why}", file=sys.stderr)
        return 2
    ledger, entry = output_owner(lines, source=str(path), audit=getattr(args, "audit", None))
    if entry.state == "closed":  # landed (or closed by --cancel) once, never re-opened: a newer export stays open
        how = f"closed ({entry.error})" if entry.error else f"landed already ({entry.landed:,} rows, {entry.updated_at})"
        print(f"dora batch import: {path} answers file {entry.id} of audit {ledger.name}, {how}: nothing landed again")
        return 0
    if entry.state not in ("exported", "landing"):
        print(
            f"dora batch import: {path} answers file {entry.id} of audit {ledger.name}, which was sent to the Batch API "
            f"(state {entry.state}): its batch lands through the audit's run (or the batch sensor), not by import",
            file=sys.stderr,
        )
        return 2
    work = work_from_ledger(ledger)
    summary = import_batched(work, entry.id, lines, bad, source=str(path))
    state = f"{summary.pending:,} requests still out" if summary.pending else "every exported file landed"
    quarantined = f"; {summary.quarantined} line(s) of another shape quarantined (landing/input_quarantine)" if summary.quarantined else ""
    print(
        f"dora batch import: {work.step}, audit {work.name}: {summary.generated:,} rows landed from "
        f"{summary.files} file(s) ({dict(summary.statuses)}); {summary.not_run:,} requests not in the output go "
        f"back to the pool{quarantined}; {state}"
    )
    return 0


def pending_lines(result) -> list[str]:
    """One line per asset of a ``dora audit`` run whose Batch API requests are still in open
    batches (its ``batch_pending`` metadata): the audit is not finished until they land."""
    lines = []
    for mat in result.get_asset_materialization_events():
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("batch_pending"):
            name = "/".join(mat.materialization.asset_key.path)
            where = f"dora batches {md['audit_id']}" if md.get("audit_id") else "dora batches"
            lines.append(
                f"dora: {name}: {md['batch_pending']:,} requests in open batches (--api-batch); run the same "
                f"command again to land them when they finish (or add --api-batch-wait); {where} shows them"
            )
    return lines


# ----------------------------------------------------------------------------- dry run


def batch_plan_text(ops: dict, *, model_version: str | None = None, target: str | None = None, api_key_env: str | None = None) -> str:
    """The ``--api-batch`` part of ``dora audit --dry-run``: per step that would send its
    requests through the Batch API (every family's :attr:`~orchestration.family.ProbeFamily.batch_steps`
    whose op is in ``ops``, enabled, with ``api_batch``), on an OpenAI-compatible backend, the
    files, requests and prompt tokens of its rows not yet landed nor in an open batch; prompt
    tokens counted with the model's tokenizer where one is here (a local folder, the Hugging
    Face cache), else estimated (~4 characters per token) and said so; the output tokens at
    most requested (``max_tokens`` x requests). A step whose requests follow from earlier steps
    (no ``work``) gets a row of ``?`` and its note.

    Args:
        model_version, target, api_key_env: a registry target's (``dora audit --target T --dry-run``):
            the partition's version (its audits' ids and ledgers), its name and key variable.

    Returns:
        The text, or ``""`` when no selected step has ``--api-batch`` (a step without ``work``
        counts only on the ``openai`` backend).
    """
    from models_inference.backends.batch_ledger import load_ledger
    from models_inference.backends.batch_requests import BatchOptions, count_prompt_tokens, custom_id, plan_files

    active = [
        (step, ops[step.op])
        for _, step in batch_steps()
        if ops.get(step.op) is not None and ops[step.op].api_batch and getattr(ops[step.op], "enabled", True)
    ]
    # the steps that can be counted first, those known only later (their rows of '?') after
    active.sort(key=lambda sc: sc[0].work is None)
    if not any(step.work is not None or config.backend == "openai" for step, config in active):
        return ""
    lines = [
        "--api-batch: the OpenAI Batch API (JSONL files, half price, 24h window); per step, for the rows not landed yet:",
        f"{'step':<26}{'files':>7}{'requests':>12}{'prompt tokens':>16}{'output tokens (at most)':>26}",
    ]
    notes = []
    own = {"model_version": model_version, "target": target, "api_key_env": api_key_env}
    for step, config in active:
        name = step.title
        if config.backend != "openai":
            notes.append(f"{name}: not through the Batch API ({step.backend_flag} {config.backend} runs the model here)")
            continue
        if step.work is None:
            lines.append(f"{name:<26}{'?':>7}{'?':>12}{'?':>16}{'?':>26}")
            notes.append(f"{name}: {step.unknown(config)}" if step.unknown else f"{name}: known once the earlier steps ran")
            continue
        work = step.work(config, **own)
        done, flying = work.done(), load_ledger(work.name).in_flight()
        todo = [i for i in work.planned if work.key(i) not in done and custom_id(work.key(i)) not in flying]
        files = plan_files(work, todo, BatchOptions(max_requests=config.api_batch_max_requests), keep_lines=False)
        requests = [work.request(i) for i in todo]
        tokens, how = count_prompt_tokens(work.backend.model_id, requests)
        output = sum(r.max_new_tokens for r in requests)
        lines.append(f"{name:<26}{len(files):>7,}{len(todo):>12,}{tokens:>16,}{output:>26,}")
        notes.append(
            f"{name}: audit {work.name}; {len(files)} file(s) of at most {config.api_batch_max_requests:,} requests "
            f"({', '.join(f'{f.requests:,}' for f in files[:12])}{', ...' if len(files) > 12 else ''}); prompt tokens {how}"
        )
    return "\n".join([*lines, *notes])


__all__ = [
    "add_batch_parsers",
    "batch_plan_text",
    "batch_steps",
    "cmd_batch",
    "cmd_batches",
    "export_configs",
    "export_families",
    "pending_lines",
    "work_from_ledger",
]

"""What ``dora audit`` prints for BiasDora after a run, and its ``--dry-run`` plan.

The record in :mod:`orchestration.defs.biasdora.family` points here (``summary``, ``plan``).
"""

from __future__ import annotations

import sys


def vision_report(result) -> str:
    """One line per vision probe of a finished audit run: what ran, or why it was skipped."""
    lines = []
    names = {"t2i_images": "T2I", "i2t_descriptions": "I2T"}
    for mat in result.get_asset_materialization_events():
        key = mat.materialization.asset_key.path
        if len(key) != 2 or key[0] != "landing" or key[1] not in names:
            continue
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("status") == "skipped":
            lines.append(f"dora: {names[key[1]]} probe skipped: {md.get('reason')}; {md.get('how_to_enable')}")
        else:
            lines.append(
                f"dora: {names[key[1]]} audit {md.get('audit_id')}: {md.get('rows_generated')} generated, "
                f"{md.get('rows_already_landed')} already landed"
            )
            if key[1] == "i2t_descriptions":
                lines.append(
                    f'  dora query "select modality, setting, descriptor, word, tfidf, fisher_q from fct_associations '
                    f"where audit_id = '{md.get('audit_id')}' and is_significant order by fisher_q limit 20\""
                )
    return "\n".join(lines)


def scoring_report(result) -> str:
    """One line per scoring asset of a finished audit run, and where the report is."""
    lines = []
    for mat in result.get_asset_materialization_events():
        key = mat.materialization.asset_key.path
        if len(key) != 2 or key[0] != "landing" or key[1] not in ("sentiment_scores", "toxicity_scores", "judge_ratings"):
            continue
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("skipped"):  # a registry target that does not list this scorer
            lines.append(f"  {key[1]}: skipped ({md['skipped']} {md.get('target_scorers')} of target {md.get('target')})")
            continue
        done = md.get("rows_scored", md.get("rows_judged", 0))
        who = md.get("scorer") or md.get("judge_model") or "-"
        extra = f", parse rate {md['parse_rate']:.1%}" if "parse_rate" in md and done else ""
        if key[1] == "judge_ratings" and done and "rated_share" in md:  # the judge: how it answered, how many rated
            extra = f", answer mode {md.get('answer_mode')}, rated {md['rated_share']:.1%}"
        lines.append(f"  {key[1]}: {done} new rows ({who}), {md.get('associations_selected', 0)} associations selected{extra}")
    if lines:
        lines = ['scores (dora report writes the HTML report; dora query "select * from agg_bias_by_dimension"):', *lines]
    return "\n".join(lines)


def summary(result, args) -> str:
    """The BiasDora part of ``dora audit``'s output: the audit summary (associations per bias
    dimension, ``--top`` of each) and the scorers' lines; the vision probes' lines go to stderr."""
    from analytics.summary import audit_summary

    audit_id = None
    for mat in result.get_asset_materialization_events():
        md = mat.materialization.metadata
        if "audit_id" in md and mat.materialization.asset_key.path[-1] == "t2t_completions":
            audit_id = md["audit_id"].value
    vision = vision_report(result)
    if vision:
        print(vision, file=sys.stderr)
    return "\n".join(t for t in (audit_summary(audit_id, top=args.top, run_id=result.run_id), scoring_report(result)) if t)


def plan(configs, audit_id: str | None = None, *, model_version: str | None = None) -> str:
    """``dora audit --dry-run`` for BiasDora: T2T prompts per setting (landed rows counted when
    the audit id is known without loading the model; none when the T2T probe is off, e.g. for a
    t2i / i2t registry target) and, when a T2I model is named, T2I rows; a line on what an I2T
    model describes when the T2T probe is off.

    Args:
        configs: op name -> Config (``t2t_completions``: AuditConfig, ``t2i_images``: VisionConfig).
        model_version: a registry partition's version, pinned on the T2T model for its audit id.
    """
    from orchestration.defs.biasdora.dry_run import format_plan, t2i_plan_lines, t2t_plan_lines

    t2t, vision = configs["t2t_completions"], configs["t2i_images"]
    if t2t.enabled:
        lines, audit_id, rate, source = t2t_plan_lines(t2t, audit_id=t2t.audit_id, model_version=model_version)
    else:
        lines, audit_id, rate, source = [], None, None, "no T2T generation (the T2T probe is off)"
    if vision.t2i_model:  # T2I rows x images (landed images need the model's version: not counted)
        lines += t2i_plan_lines(vision.t2i_settings, vision.descriptors, vision.per_dimension, vision.images_per_descriptor)
    if not lines and vision.i2t_model:
        images = f"--image-audit-id {vision.image_audit_id}" if vision.image_audit_id else "this run's T2I probe (--t2i-model)"
        return (
            f"dora audit --dry-run: no model loaded; I2T: {vision.i2t_model} ({vision.i2t_backend}) describes the images "
            f"of {images} with {len(vision.i2t_settings)} prompts ({', '.join(vision.i2t_settings)}); rows known once "
            "the images are listed"
        )
    return format_plan(lines, audit_id, rate, source)


def estimate(configs, model_version: str | None = None) -> list:
    """BiasDora's steps in ``dora audit --dry-run``'s time estimate
    (``orchestration.family.EstimatedStep``; ``dry_run.py: step_estimates``): on
    the embedded defaults every step from a measured rate; another T2T model's generation and
    another judge's ratings are unknown; ``[]`` when the T2T probe is off (the image probes'
    times are not measured: one unknown step when a T2I or I2T model is named)."""
    from ingestion.vocabulary import DEFAULT_MODEL
    from orchestration.defs.biasdora.dry_run import step_estimates, t2t_plan_lines
    from orchestration.family import EstimatedStep

    t2t, vision, judge = configs["t2t_completions"], configs["t2i_images"], configs["judge_ratings"]
    steps = []
    if t2t.enabled:
        lines, _, rate, _ = t2t_plan_lines(t2t, audit_id=t2t.audit_id, model_version=model_version)
        todo = sum(ln.to_generate if ln.to_generate is not None else ln.prompts for ln in lines)
        embedded = t2t.backend == "transformers" and t2t.model == DEFAULT_MODEL
        steps = step_estimates(
            todo,
            rate,
            judge_runs=judge.runs,
            judge_on=judge.enabled,
            # an earlier audit's count measures the embedded model only
            significant=_last_significant() if embedded else None,
            judge_measured=judge.backend == "transformers" and judge.model in (None, DEFAULT_MODEL),
            rerun=_rerun(lines),
        )
        if not embedded:  # another model loads and scores at rates not measured here
            steps = [
                s if s.step != "model load (T2T, judge)" else EstimatedStep(s.step, None, "unknown", "not measured for this model") for s in steps
            ]
    if vision.t2i_model or vision.i2t_model:
        steps.append(EstimatedStep("image probes (T2I / I2T)", None, "unknown", "no measured rate for image models"))
    return steps


def _rerun(lines) -> bool:
    """Every T2T prompt of the audit has landed (the audit id is known and nothing is left to generate)."""
    t2t = [ln for ln in lines if ln.modality == "t2t"]
    return bool(t2t) and all(ln.to_generate == 0 for ln in t2t)


def _last_significant() -> tuple[int, str] | None:
    """The significant associations of the embedded model's latest finished BiasDora audit in
    the warehouse and its id, or ``None`` (no warehouse, no such audit)."""
    from analytics.query import execute_query
    from models_inference.backends.text import DeferredTransformersBackend

    model_id = DeferredTransformersBackend().model_id  # its identity only: nothing is loaded

    try:
        rows = execute_query(
            "select significant_associations, audit_id from agg_biasdora_audits where model_id = ? and status = 'finished' "
            "order by started_at desc limit 1",
            params=[model_id],
        ).rows
    except Exception:  # noqa: BLE001 - no warehouse or no dim_audits yet: the estimate assumes instead
        return None
    return (int(rows[0][0]), f"audit {rows[0][1]}") if rows else None


def diff(args, change_tests: list, *, family: str) -> int:
    """``dora diff TARGET`` for BiasDora: ``analytics.diff.audit_diff`` of two audits of a
    registry target by ``family`` (BiasDora's name); a target or audit of another family gets a
    one-line hint to ``--family`` (found through ``change_tests``, the other families'
    ``FamilyChangeTest`` s)."""
    import duckdb

    from analytics.diff import DiffError, audit_diff
    from analytics.diff_result import diff_csv, diff_json, verdict, with_background
    from analytics.family_diff import family_hint
    from analytics.query import WarehouseBusyError, WarehouseMissingError

    try:
        report = audit_diff(args.target, args.from_ref, args.to_ref, top=args.top, family=family)
        report, background = with_background(report)
    except (DiffError, duckdb.CatalogException) as exc:  # CatalogException: no BiasDora marts built
        hint = family_hint(change_tests, args.target, args.from_ref, args.to_ref)
        print(f"dora diff: {str(exc).splitlines()[0]}{hint}", file=sys.stderr)
        return 2
    except (WarehouseBusyError, WarehouseMissingError) as exc:
        print(f"dora diff: {exc}", file=sys.stderr)
        return 2
    from orchestration.defs.biasdora.drift import DRIFT

    state = verdict(report, DRIFT, _collapse_ratios(args.target))
    fail_on = getattr(args, "fail_on", None)
    if args.format == "json":
        print(diff_json(report, state, background))
    elif args.format == "csv":
        print(diff_csv(report, state, background), end="")
    else:
        print(report.text())
        print(f"  verdict: {state.state}" + (f" ({'; '.join(state.reasons)})" if state.reasons else ""))
    if state.fails(fail_on):
        # the verdict on stderr too: a CI log shows why the job failed whatever the format
        print(f"dora diff: --fail-on {fail_on}: {state.state}: {'; '.join(state.reasons)}", file=sys.stderr)
        return 1
    return 0


def _collapse_ratios(target: str) -> dict[str, float]:
    """The collapse ratios of BiasDora's drift checks a registry target sets (``options:
    {biasdora: {checks: ...}}``, or an older ``checks:`` block), the drift checks' own for those
    it does not; ``{}`` for an ad-hoc target or an unreadable registry."""
    from ingestion.registry import RegistryError, load_registry
    from orchestration.defs.biasdora.drift import DRIFT, legacy_thresholds
    from orchestration.options import collapse_ratios

    try:
        found = next((t for t in load_registry().targets if t.name == target), None)
    except (RegistryError, OSError):
        return {}
    return collapse_ratios(found, DRIFT.family, legacy_thresholds) if found is not None else {}


def reparse(args, home) -> int:
    """``dora reparse`` for BiasDora: ``models_inference/probes/biasdora/reparse.py`` over the landed
    T2T raw outputs (``args.audit_id``: one audit), then, with ``args.build``, the dbt build of
    ``stg_t2t_completions`` and every model downstream of it (in ``home``).

    Raises:
        ReparseError: as ``reparse_t2t`` (one line, exit 2).
    """
    from models_inference.probes.biasdora.reparse import reparse_t2t

    summary = reparse_t2t(args.audit_id)  # ReparseError: one line, exit 2
    print(summary.text())
    if not args.build:
        if summary.landed:
            print("next: dora reparse --build (or the next dora audit) rebuilds the marts with the re-parsed words")
        return 0
    from analytics.dbt_runner import invoke_dbt

    try:
        invoke_dbt(["build", "--select", "stg_t2t_completions+"], home)
    except RuntimeError as exc:  # dbt's failing nodes: the re-parsed rows stay landed for the next build
        print(f"dora reparse: the dbt build failed (the re-parsed rows are landed; the next build uses them): {exc}", file=sys.stderr)
        return 1
    print("dora reparse: stg_t2t_completions and its downstream models rebuilt")
    return 0

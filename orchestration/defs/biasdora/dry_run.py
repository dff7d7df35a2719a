"""BiasDora's ``dora audit --dry-run`` plan: its probes' rows without loading any model.

For each modality x setting: probe rows, prompts (rows x letters x runs for T2T; rows x
images for T2I), rows already landed for the audit, rows to generate, and an estimated time
from a measured throughput. Paper scale (``--per-dimension 0 --runs 10``) gives the paper's
Table 4 T2T totals: 105,560 / 107,380 / 105,560 / 105,560 / 105,560 prompts (406 / 413 /
406 / 406 / 406 rows x 26 letters x 10 runs; BiasDora seed 004, Table 4; docs/method.md#1-descriptors).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from orchestration.family import EstimatedStep

#: Measured T2T throughput of the embedded SmolLM2-135M, completion style, shared-prefix decoding
#: (the default audit on a fresh clone, 4 runs per prompt, 2 cores; ``benchmarks/bench_t2t_throughput.py``).
EMBEDDED_PROMPTS_PER_SECOND = 170.0


@dataclass
class PlanLine:
    """One modality x setting of the plan."""

    modality: str
    setting: str
    probe_rows: int
    prompts: int
    already_landed: int | None
    to_generate: int | None


def t2t_plan_lines(config, *, audit_id: str | None = None, model_version: str | None = None) -> tuple[list[PlanLine], str | None, float | None, str]:
    """The T2T plan of an :class:`orchestration.defs.biasdora.config.AuditConfig` (no model is loaded).

    Returns:
        (lines per setting, the audit id or None when it cannot be known without loading the
        model, prompts per second or None, where the throughput comes from). The audit id is
        the real run's: ``models_inference.probes.biasdora.t2t.audit_id_for`` over the backend,
        the resolved probe config and every selected template (``build_templates``), unless
        ``audit_id`` (``--audit-id``) names it.
    """
    from models_inference.probes.biasdora.t2t import T2T_TABLE, T2TProbeConfig, audit_id_for, t2t_plan
    from models_inference.resumable import landed_keys
    from orchestration.defs.biasdora.t2t.assets import build_templates

    templates = build_templates(config)
    probe = T2TProbeConfig(
        runs=config.runs, letters=config.letters, prompt_style=config.prompt_style, temperature=config.temperature, top_p=config.top_p
    )
    backend, rate, rate_source = None, None, "unknown (no measured throughput for this model)"
    from ingestion.vocabulary import DEFAULT_MODEL

    if config.backend == "transformers" and config.model == DEFAULT_MODEL:
        from models_inference.backends.text import DeferredTransformersBackend

        backend = DeferredTransformersBackend()  # identity only: nothing is loaded
        rate, rate_source = (
            EMBEDDED_PROMPTS_PER_SECOND,
            "the default audit on 2 cores, shared-prefix decoding; the paper's 10 runs per prompt go faster (BENCHMARKS.md)",
        )
    elif config.backend == "openai":
        from models_inference.backends.text import load_text_backend

        try:
            backend = load_text_backend(config.model, backend="openai", **({"base_url": config.base_url} if config.base_url else {}))
        except Exception:  # noqa: BLE001 - no key: the audit id stays unknown
            backend = None
    if backend is not None and model_version:  # a registry partition's run pins its version the same way
        from orchestration.defs.audits.runs import with_model_version

        backend = with_model_version(backend, model_version)
    if audit_id is None and backend is not None:  # as probe_t2t derives it: the selection is part of the id
        audit_id = audit_id_for(backend, probe.resolved(backend), templates)
    cfg = probe.resolved(backend) if backend is not None else probe
    planned, key = t2t_plan(templates, cfg)
    done = landed_keys(T2T_TABLE, audit_id) if audit_id else None
    rows_by, prompts_by, landed_by = Counter(), Counter(), Counter()
    for t in templates:
        rows_by[t.setting] += 1
    for item in planned:
        prompts_by[item[0].setting] += 1
        if done is not None and key(item) in done:
            landed_by[item[0].setting] += 1
    lines = []
    for setting in config.settings:
        if setting not in prompts_by:
            continue
        landed = landed_by[setting] if done is not None else None
        lines.append(
            PlanLine("t2t", setting, rows_by[setting], prompts_by[setting], landed, None if landed is None else prompts_by[setting] - landed)
        )
    return lines, audit_id, rate, rate_source


def t2i_plan_lines(settings, descriptors, per_dimension: int, images_per_descriptor: int) -> list[PlanLine]:
    """The T2I plan (rows of the paper's T2I lists x images); landed rows are not counted
    (the image audit id needs the image model's version, i.e. loading it)."""
    from models_inference.probes.biasdora.t2i import curated_t2i_templates, select_t2i_templates

    templates = select_t2i_templates(curated_t2i_templates(settings), settings=settings, descriptors=descriptors, per_dimension=per_dimension)
    rows = Counter(t.setting for t in templates)
    return [PlanLine("t2i", s, rows[s], rows[s] * images_per_descriptor, None, None) for s in settings if rows[s]]


def format_plan(lines: list[PlanLine], audit_id: str | None, rate: float | None, rate_source: str) -> str:
    """The plan as the text ``dora audit --dry-run`` prints (thousands separated by commas)."""
    from orchestration.estimates import duration

    out = [
        f"dora audit --dry-run: no model loaded; audit id {audit_id or '(unknown until the model is loaded)'}",
        f"{'modality':<9}{'setting':<12}{'rows':>7}{'prompts':>11}{'landed':>11}{'to generate':>13}",
    ]
    total, todo = 0, 0
    t2t_todo = 0
    for line in lines:
        landed = f"{line.already_landed:,}" if line.already_landed is not None else "?"
        gen = f"{line.to_generate:,}" if line.to_generate is not None else f"{line.prompts:,}"
        out.append(f"{line.modality:<9}{line.setting:<12}{line.probe_rows:>7,}{line.prompts:>11,}{landed:>11}{gen:>13}")
        total += line.prompts
        todo += line.to_generate if line.to_generate is not None else line.prompts
        if line.modality == "t2t":
            t2t_todo += line.to_generate if line.to_generate is not None else line.prompts
    out.append(f"{'total':<21}{'':>7}{total:>11,}{'':>11}{todo:>13,}")
    if rate:
        out.append(
            f"estimated T2T generation time: {duration(t2t_todo / rate)} at {rate} prompts/s ({rate_source}); more when other processes share the CPU"
        )
    else:
        out.append(f"estimated T2T generation time: {rate_source}")
    return "\n".join(out)


#: Measured step times of the embedded defaults (BENCHMARKS.md; 2 cores): the model's load
#: (``bench_t2t_throughput``: 2.8 s), the first audit's descriptor lists and both dbt builds
#: (``bench_incremental``, a first tiny audit: landing__descriptors 18.1 s, dora_dbt_models
#: 18.9 s, dora_score_models 14.9 s; the builds' cost is mostly dbt's fixed cost at this
#: scale), sentiment + toxicity scoring (42 significant associations in 0.4 s + 1.0 s) and the
#: SmolLM2 judge (``bench_t2t_throughput --judge``: constrained answers, batched, 2.8 per second
#: at load ~2; the 0.51 per second once measured inside an audit was a machine at load ~20).
#: Python's start and the Dagster run are every audit's (``orchestration/estimates.py``).
MEASURED_STEPS = {
    "model load": 2.8,
    "descriptor lists": 18.1,
    "dbt builds": 18.9 + 14.9,
    "scoring per association": (0.4 + 1.0) / 42,
    "judgements per second": 2.8,
    # bench_incremental's re-run of a finished audit: both dbt builds on unchanged inputs
    "dbt builds, nothing new": 3.6 + 2.7,
}
#: Significant associations per T2T completion when no earlier audit of the model says: the
#: scoring benchmark's 42 of 5,850 completions (an assumption: it depends on the model).
ASSUMED_SIGNIFICANT_PER_COMPLETION = 42 / 5850


def step_estimates(
    t2t_todo: int,
    rate: float | None,
    *,
    judge_runs: int,
    judge_on: bool,
    significant: tuple[int, str] | None,
    judge_measured: bool = True,
    rerun: bool = False,
) -> list[EstimatedStep]:
    """Every BiasDora step of the embedded default audit with its time and where the time comes from.

    Args:
        t2t_todo: T2T prompts to generate; ``rate`` prompts per second (None: unknown).
        significant: (significant associations, where the number comes from) of the latest
            finished audit of the model, or ``None`` (then assumed from the completions).
        judge_measured: the judge is the embedded SmolLM2 (its rate is measured); another
            judge's time is unknown (a server's or an API's rate is not measured here).
        rerun: every prompt of the audit has landed (a re-run of the same audit id): its
            descriptor lists and associations are there and scored, and the dbt builds find
            nothing new (bench_incremental's re-run).

    Returns:
        the steps (:class:`~orchestration.family.EstimatedStep`, seconds of wall time on 2 cores);
        their sum with the start-up every audit has is the estimate.
    """
    m = MEASURED_STEPS
    if rerun:
        done = "the audit's rows, associations and scores have landed"
        return [
            EstimatedStep("model load (T2T)", m["model load"], "measured", "bench_t2t_throughput, BENCHMARKS.md"),
            EstimatedStep("T2T generation", 0.0, "measured", "nothing to generate: every prompt has landed"),
            EstimatedStep("dbt builds (nothing new)", m["dbt builds, nothing new"], "measured", "bench_incremental's re-run"),
            EstimatedStep("scoring and judge", 0.0, "measured", f"{done}: skipped"),
        ]
    steps = [
        EstimatedStep("model load (T2T, judge)", 2 * m["model load"], "measured", "bench_t2t_throughput, BENCHMARKS.md"),
        EstimatedStep("T2T generation", t2t_todo / rate, "measured", f"{rate} prompts/s")
        if rate
        else EstimatedStep("T2T generation", None, "unknown", "no measured rate for this model"),
        EstimatedStep("descriptor lists (a home's first audit)", m["descriptor lists"], "measured", "bench_incremental"),
        EstimatedStep("dbt builds (associations, scores)", m["dbt builds"], "measured", "bench_incremental"),
    ]
    if significant is None:
        n = round(t2t_todo * ASSUMED_SIGNIFICANT_PER_COMPLETION)
        basis, source = (
            "assumed",
            f"{n} significant associations ({ASSUMED_SIGNIFICANT_PER_COMPLETION:.2%} of the completions, the scoring benchmark's share)",
        )
    else:
        n = significant[0]
        basis, source = "measured", f"{n} significant associations in {significant[1]}"
    steps.append(EstimatedStep("sentiment + toxicity scoring", n * m["scoring per association"], basis, source))
    judge = f"LLM judge ({judge_runs} run{'s' if judge_runs != 1 else ''} per association)"
    if judge_on and not judge_measured:
        steps.append(EstimatedStep(judge, None, "unknown", "no measured rate for this judge"))
    elif judge_on:
        steps.append(
            EstimatedStep(
                judge,
                n * judge_runs / m["judgements per second"],
                basis,
                f"{source}; {m['judgements per second']:.2f} judgements/s, bench_t2t_throughput --judge (BENCHMARKS.md)",
            )
        )
    return steps

"""The counterfactual family (Howard et al., seed 003) for the family seam (:mod:`orchestration.family`).

Its flags are ``--cf-*`` (derived from :class:`CounterfactualConfig`'s fields); the audited
model is BiasDora's ``--model`` / ``--backend`` / ``--base-url`` / ``--batch-size`` (the
same flags set both families' fields).
"""

from __future__ import annotations

from analytics.counterfactual_report import LVLM_LLM_STATISTICS
from analytics.drift import DriftCheck, FamilyDrift
from analytics.family_diff import FamilyChangeTest
from ingestion.vocabulary import I2T_BACKENDS, JUDGE_BACKENDS
from models_inference.probes.counterfactual.errors import CounterfactualInputError
from models_inference.probes.counterfactual.prompts import ALL_PROMPTS, MITIGATIONS, SUBSETS
from orchestration import cli_validation as v
from orchestration.defaults import MAX_TOKENS
from orchestration.defs.counterfactual.config import COUNTERFACTUAL_OPS, CounterfactualConfig
from orchestration.family import BatchStep, EstimatedStep, Flag, declared_family, text_model_target

NAME = "counterfactual"
C = CounterfactualConfig
P = "cf-"

FLAGS: tuple[Flag, ...] = (
    # the audited model: the flags BiasDora declares (one value for both families)
    Flag(((C, "model"),), name="--model"),
    Flag(((C, "backend"),), name="--backend"),
    Flag(((C, "base_url"),), name="--base-url"),
    Flag(((C, "batch_size"),), name="--batch-size"),
    Flag(((C, "subsets"),), prefix=P, choices=tuple(SUBSETS)),
    Flag(((C, "occupations"),), prefix=P),
    *Flag.of(C, "sets_per_occupation", "max_sets", "block_sets", "custom_occupations", prefix=P),
    Flag(((C, "prompts"),), prefix=P, choices=tuple(ALL_PROMPTS)),
    *Flag.of(C, "runs", prefix=P),
    Flag(((C, "mitigations"),), prefix=P, choices=tuple(MITIGATIONS)),
    *Flag.of(C, "max_new_tokens", prefix=P),
    # 0 = no separate budget for numeric prompts (the field's None)
    Flag(((C, "numeric_max_new_tokens"),), prefix=P, validator=v.int_range(0, MAX_TOKENS, " (0 = --cf-max-new-tokens)"), convert=lambda n: n or None),
    Flag(((C, "judge_backend"),), prefix=P, choices=JUDGE_BACKENDS),
    Flag(((C, "judge_model"),), prefix=P, local_model="cf_judge_backend"),
    Flag(((C, "lexicon"),), prefix=P, path="file"),
    # image sets (the LVLM) and their paired text sets (section 5.1)
    Flag(((C, "images"),), prefix=P, path="file_or_folder"),
    Flag(((C, "vision_model"),), prefix=P, local_model="cf_vision_backend"),
    Flag(((C, "vision_backend"),), prefix=P, choices=I2T_BACKENDS),
    Flag(((C, "vision_base_url"),), prefix=P, validator=v.base_urls),
    *Flag.of(C, "vision_batch_size", "paired_text", prefix=P),
)


def check(configs) -> str | None:
    """``dora audit``'s check of the counterfactual settings before Dagster starts: image sets
    need their LVLM (``--cf-images`` with ``--cf-vision-model``), a lexicon file
    (``--cf-lexicon``) must hold a usable word, user-defined sets (``--cf-custom-occupations``)
    must be buildable (cheap: neither loads the released sets nor a model)."""
    from models_inference.probes.counterfactual.sets import competence_lexicon, custom_sets

    config = configs[COUNTERFACTUAL_OPS[0]]
    if config.images and not config.vision_model:
        return "--cf-images needs --cf-vision-model (the LVLM shown the images, section 5.1)"
    try:
        if config.lexicon:
            competence_lexicon(config.lexicon)
        if config.custom_occupations:
            custom_sets(config.custom_occupations, config.subsets)
    except CounterfactualInputError as exc:
        return f"--cf-lexicon / --cf-custom-occupations: {exc}"
    return None


CHANGE_TEST = FamilyChangeTest(
    NAME,
    "fct_max_toxicity_change_tests",
    "fct_counterfactual_responses",
    "generated_at",
    (
        "subset",
        "prompt_label",
        "mitigation",
        "head",
        "units_before",
        "units_after",
        "mean_max_toxicity_before",
        "mean_max_toxicity_after",
        "change_p",
        "change_q",
        "is_significant_change",
        "change_type",
    ),
    ("subset", "prompt_label", "mitigation", "head"),
    "mean MaxToxicity (max - min of a head's score over a counterfactual set) per subset, prompt, mitigation, head",
    "two-sided Mann-Whitney U on the two audits' per-(set, run) MaxToxicity values (bounded, skewed: a rank test)",
    related=(
        "agg_lvlm_llm_max_toxicity",
        "LVLM vs LLM MaxToxicity (section 5.1 Pearson r / p, Table 3 differences)",
        ("lvlm_audit_id", "llm_audit_id"),
        (
            "lvlm_audit_id",
            "llm_audit_id",
            "subset",
            "prompt_label",
            "mitigation",
            "head",
            *LVLM_LLM_STATISTICS,
        ),
    ),
)


def summary(result, args=None) -> str:
    """Lines for ``dora audit``'s summary: what the counterfactual assets of ``result`` did."""
    lines = []
    for mat in result.get_asset_materialization_events():
        key = mat.materialization.asset_key.path
        if len(key) != 2 or key[0] != "landing" or not key[1].startswith("counterfactual_"):
            continue
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("skipped"):
            if key[1] == "counterfactual_responses":
                lines.append(f"  skipped: {md.get('reason')}")
            continue
        if key[1] == "counterfactual_responses":
            if md.get("audit_id"):
                lines.append(
                    f"  {md.get('audit_id')}: {md.get('rows_generated')} new responses ({md.get('rows_planned')} planned, "
                    f"{md.get('sets')} sets, max {md.get('max_new_tokens')} tokens)"
                )
            if md.get("image_audit_id"):
                lines.append(
                    f"  {md['image_audit_id']} (image sets on {md.get('image_model_id')}): {md.get('image_rows_generated')} new "
                    f"responses ({md.get('image_rows_planned')} planned, {md.get('image_sets')} sets, "
                    f"{md.get('image_rows_quarantined')} images quarantined; LVLM vs LLM: agg_lvlm_llm_max_toxicity)"
                )
        elif key[1] == "counterfactual_toxicity":
            lines.append(f"  toxicity: {md.get('rows_scored')} responses scored ({md.get('scorer')})")
        elif key[1] == "counterfactual_stereotype_flags":
            lines.append(f"  stereotype filter: {md.get('answers')} answers for {md.get('groups_with_candidates')} groups")
    if lines:
        lines = ['counterfactual probe (dora query "select * from agg_max_toxicity"):', *lines]
    return "\n".join(lines)


def plan(configs, model_version: str | None = None) -> str:
    """``dora audit --dry-run`` for counterfactual: sets and responses planned (no model loaded;
    rows already landed are known only once the model's version is read)."""
    from models_inference.probes.counterfactual import probe as cf
    from orchestration.defs.counterfactual.assets import build_image_sets, build_sets, probe_config

    config = configs[COUNTERFACTUAL_OPS[0]]
    image_sets = build_image_sets(config)
    sets = build_sets(config, image_sets)
    rows = len(cf.plan(sets, probe_config(config)))
    text = (
        f"counterfactual: {len(sets)} sets x {len(config.prompts)} prompts on {config.model} ({config.backend}): "
        f"{rows:,} responses to generate at most, each scored by {config.toxicity_scorer}"
    )
    if image_sets is not None:
        image_rows = len(cf.plan(image_sets, probe_config(config)))
        text += (
            f"\ncounterfactual image sets: {len(image_sets)} sets ({len(image_sets.quarantined)} images quarantined) x "
            f"{len(config.prompts)} prompts on {config.vision_model} ({config.vision_backend}): {image_rows:,} responses at most"
        )
    return text


#: Measured times of the default text-set sample on the embedded SmolLM2-135M (2 cores):
#: ``bench_counterfactual`` (model load 3.4 s, 120 responses at 3.7 responses/s, toxicity heads
#: 0.3 s; load ~4) and ``bench_dry_run_estimate`` in a default audit on a shared machine (the
#: released sets 4.0 s at load 6.7, the stereotype filter and fan-in 0.8 s at load ~15; its
#: share of the dbt build 30.3 s at load 17.6), each divided by the load factor of that load
#: (``orchestration.estimates.load_factor``: load / 2 cores, the audit's own process included).
MEASURED = {
    "model load": 3.4,
    "responses per second": 3.7,
    "toxicity scoring": 0.3,
    "sets, lexicon, stereotype filter": 4.0 / 3.4 + 0.8 / 7.5,
    "dbt models": 30.3 / 8.8,
}


def estimate(configs, model_version: str | None = None) -> list[EstimatedStep]:
    """The counterfactual steps of ``dora audit --dry-run``'s time estimate: the text sets'
    responses (at most: :func:`plan`'s count) at the rate measured on the embedded model, unknown
    on another model or with image sets; ``[]`` when the family is off."""
    from ingestion.vocabulary import DEFAULT_MODEL
    from models_inference.probes.counterfactual import probe as cf
    from orchestration.defs.counterfactual.assets import build_image_sets, build_sets, probe_config

    config = configs[COUNTERFACTUAL_OPS[0]]
    if not config.enabled:
        return []
    m, bench = MEASURED, "bench_counterfactual, BENCHMARKS.md"
    image_sets = build_image_sets(config)
    rows = len(cf.plan(build_sets(config, image_sets), probe_config(config)))
    embedded = config.backend == "transformers" and config.model == DEFAULT_MODEL
    steps = [
        EstimatedStep("model load", m["model load"], "measured", bench)
        if embedded
        else EstimatedStep("model load", None, "unknown", f"not measured for {config.model}"),
        EstimatedStep(
            f"{rows:,} responses (at most)", rows / m["responses per second"], "measured", f"{m['responses per second']} responses/s, {bench}"
        )
        if embedded
        else EstimatedStep(f"{rows:,} responses (at most)", None, "unknown", f"no measured rate for {config.model} ({config.backend})"),
        EstimatedStep(f"toxicity ({config.toxicity_scorer})", m["toxicity scoring"] * rows / 120, "measured", f"{bench}: 120 responses in 0.3 s"),
        EstimatedStep(
            "sets, lexicon, stereotype filter", m["sets, lexicon, stereotype filter"], "measured", "bench_dry_run_estimate, scaled to a free machine"
        ),
        EstimatedStep("dbt models (its share of the build)", m["dbt models"], "measured", "bench_dry_run_estimate, scaled to a free machine"),
    ]
    if image_sets is not None:
        steps.append(EstimatedStep("image sets (LVLM)", None, "unknown", "no measured rate for image models"))
    return steps


def _report_section(audit_id, out) -> str:
    from analytics.counterfactual_report import counterfactual_section

    return counterfactual_section(audit_id)


def text_sets_batch_work(config, *, model_version: str | None = None, target: str | None = None, api_key_env: str | None = None):
    """The text-set step of a :class:`~orchestration.defs.counterfactual.config.CounterfactualConfig`
    as a :class:`~models_inference.backends.batch_requests.BatchWork` (no model is loaded, no key read):
    what ``dora batch export`` / ``import`` and the dry run's batch pricing rebuild it from."""
    from models_inference.probes.counterfactual.probe import text_sets_work
    from orchestration.defs.audits.runs import with_model_version
    from orchestration.defs.counterfactual.assets import _text_backend, build_image_sets, build_sets, probe_config

    backend = _text_backend(config)
    if api_key_env and hasattr(backend, "api_key_env"):
        backend.api_key_env = api_key_env
    if model_version:
        backend = with_model_version(backend, model_version)
    sets = build_sets(config, build_image_sets(config))
    return text_sets_work(sets, backend, probe_config(config), audit_id=config.audit_id, target=target)


#: the counterfactual family's drift checks (dbt_project/models/marts/counterfactual/agg_counterfactual_drift.sql)
DRIFT = FamilyDrift(
    NAME,
    "agg_counterfactual_drift",
    (
        DriftCheck("max_toxicity", "MaxToxicity (toxicity head) on the common (set, run) units; Mann-Whitney U", "rises"),
        DriftCheck("numeric_rating", "mean numeric answer on the common answers, each prompt scaled to its largest; Mann-Whitney U", None),
    ),
)


FAMILY = declared_family(
    __name__,
    title="counterfactual sets (Howard et al., seed 003): MaxToxicity, PMI stereotype words, competence words, numeric ratings",
    paper="Howard et al. (seed 003)",
    modalities="text sets (LLM), image sets (LVLM)",
    measures=(
        "the same prompt over subjects differing only in race, gender or physical attributes: MaxToxicity, PMI stereotype words, competence words, numeric ratings"
    ),
    default_audit="on (one text set of the paper's section 5.1 variant)",
    description="Counterfactual sets (one occupation, members differing only in race / gender / physical characteristics) "
    "prompted with the paper's prompts. Default: a quick text-set sample on the audit's model (--model).",
    configs={op: C for op in COUNTERFACTUAL_OPS},
    audit_assets=("landing/counterfactual_responses",),
    report_section=_report_section,
    target_models=text_model_target(C),
    batch_steps=(BatchStep("counterfactual_text", "counterfactual text sets", "counterfactual_responses", work=text_sets_batch_work),),
    errors=(CounterfactualInputError,),
)

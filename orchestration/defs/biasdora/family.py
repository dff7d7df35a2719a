"""BiasDora (seed 004) as a probe family: its record for the family seam (:mod:`orchestration.family`).

Descriptors from CrowS-Pairs, the T2T / T2I / I2T probes, tf-idf + Fisher associations
(dbt), and their sentiment / toxicity / LLM-judge scores. Its flags are the unprefixed ones
of ``dora audit`` (``--model``, ``--runs``, ``--t2i-model``, ``--judge-model`` ...).
"""

from __future__ import annotations

from ingestion.vocabulary import I2T_BACKENDS, I2T_SETTINGS, JUDGE_BACKENDS, PROMPT_STYLES, T2I_BACKENDS, T2I_SETTINGS, T2T_BACKENDS, T2T_SETTINGS
from models_inference.probes.biasdora.judge import ANSWER_MODES
from orchestration import cli_validation as v
from orchestration.defs.biasdora.config import AuditConfig, DescriptionWordsConfig, VisionConfig, apply_vision_presets
from orchestration.defs.biasdora.drift import DRIFT, legacy_thresholds
from orchestration.defs.biasdora.scoring.config import JudgeConfig, SentimentConfig, ToxicityConfig
from orchestration.defs.biasdora.target import TARGET_FIELDS, TARGET_MODELS, configure_target
from orchestration.family import BatchStep, Flag, ProbeFamily

NAME = "biasdora"

#: Op name -> the Config class of its run config.
CONFIGS = {
    "t2t_completions": AuditConfig,
    "t2i_images": VisionConfig,
    "i2t_descriptions": VisionConfig,
    "description_words": DescriptionWordsConfig,
    "sentiment_scores": SentimentConfig,
    "toxicity_scores": ToxicityConfig,
    "judge_ratings": JudgeConfig,
}

SCORERS = ((SentimentConfig, "score_all"), (ToxicityConfig, "score_all"), (JudgeConfig, "score_all"))

#: BiasDora's ``dora audit`` flags, in ``--help`` order (T2T probe, T2I / I2T probes, scoring).
FLAGS: tuple[Flag, ...] = (
    *Flag.of(AuditConfig, "model"),
    Flag(((AuditConfig, "backend"),), choices=T2T_BACKENDS),
    Flag(((AuditConfig, "base_url"),), validator=v.base_urls),
    Flag(((AuditConfig, "settings"),), choices=T2T_SETTINGS, what="T2T setting"),
    *Flag.of(AuditConfig, "runs"),
    Flag(((AuditConfig, "letters"),), validator=v.letters),
    Flag(((AuditConfig, "descriptor_source"),), choices=("biasdora", "crows_pairs")),
    Flag(((AuditConfig, "descriptors"), (VisionConfig, "descriptors"))),
    Flag(((AuditConfig, "per_dimension"), (VisionConfig, "per_dimension"))),
    Flag(((AuditConfig, "prompt_style"),), choices=PROMPT_STYLES),
    *Flag.of(AuditConfig, "batch_size"),
    Flag(((AuditConfig, "t2t_block_templates"),)),
    *Flag.of(AuditConfig, "t2t_shard_rows"),
    Flag(((AuditConfig, "audit_id"),), validator=v.audit_id),
    Flag(((AuditConfig, "registry"),), path="file"),
    *Flag.of(AuditConfig, "api_timeout", "api_concurrency", "api_max_retries"),
    # T2I / I2T probes (orchestration/defs/biasdora/vision/)
    Flag(((VisionConfig, "t2i_backend"),), choices=T2I_BACKENDS),
    Flag(((VisionConfig, "t2i_model"),), local_model="t2i_backend"),
    Flag(((VisionConfig, "t2i_base_url"),), validator=v.base_urls),
    *Flag.of(VisionConfig, "t2i_vae", "t2i_steps"),
    Flag(((VisionConfig, "t2i_size"),), validator=v.image_size),
    *Flag.of(VisionConfig, "t2i_quality", "t2i_styles"),
    Flag(((VisionConfig, "t2i_settings"),), choices=T2I_SETTINGS, what="T2I setting"),
    *Flag.of(VisionConfig, "images_per_descriptor"),
    Flag(((VisionConfig, "image_audit_id"),), validator=v.audit_id),
    Flag(((VisionConfig, "i2t_backend"),), choices=I2T_BACKENDS),
    Flag(((VisionConfig, "i2t_model"),), local_model="i2t_backend"),
    Flag(((VisionConfig, "i2t_base_url"),), validator=v.base_urls),
    Flag(((VisionConfig, "i2t_settings"),), choices=I2T_SETTINGS, what="I2T setting"),
    *Flag.of(VisionConfig, "i2t_max_new_tokens", "t2i_prompt_suffix", "i2t_system_prompt", "i2t_image_size"),
    Flag(((DescriptionWordsConfig, "stop_list"),), choices=("nltk", "spacy")),
    *Flag.of(DescriptionWordsConfig, "drop_descriptor_words"),
    # scoring (orchestration/defs/biasdora/scoring/)
    Flag(SCORERS),
    Flag(tuple((c, "score_pool") for c, _ in SCORERS), choices=("fisher", "paper", "all")),
    Flag(((SentimentConfig, "scorer"),), name="--sentiment-scorer"),
    Flag(((ToxicityConfig, "scorer"),), name="--toxicity-scorer"),
    Flag(((JudgeConfig, "backend"),), name="--judge-backend", choices=JUDGE_BACKENDS),
    Flag(((JudgeConfig, "model"),), name="--judge-model", local_model="judge_backend"),
    Flag(((JudgeConfig, "base_url"),), name="--judge-base-url", validator=v.base_urls),
    Flag(((JudgeConfig, "runs"),), name="--judge-runs"),
    Flag(((JudgeConfig, "answer_mode"),), name="--judge-answer", choices=ANSWER_MODES),
)


def adjust(values: dict) -> None:
    """Cross-flag rules: the paper presets of ``--t2i-model paper-sd`` / ``--i2t-model
    paper-llava``; ``--judge-backend none`` turns the judge off (its asset lands nothing)."""
    apply_vision_presets(values.setdefault(VisionConfig, {}))
    judge = values.setdefault(JudgeConfig, {})
    if judge.get("backend") == "none":
        judge.update(backend=JudgeConfig.model_fields["backend"].default, enabled=False)


def _assets():
    from orchestration.defs.biasdora.ingestion.assets import ingestion_assets
    from orchestration.defs.biasdora.scoring.assets import scoring_assets
    from orchestration.defs.biasdora.t2t.assets import t2t_assets
    from orchestration.defs.biasdora.vision.assets import vision_assets

    return [*ingestion_assets, *t2t_assets, *vision_assets, *scoring_assets]


def _checks():
    from orchestration.defs.biasdora.scoring.checks import judge_checks  # the judge's parse rate

    return judge_checks


def _summary(result, args) -> str:
    from orchestration.defs.biasdora.summary import summary

    return summary(result, args)


def _plan(configs, model_version: str | None = None) -> str:
    from orchestration.defs.biasdora.summary import plan

    return plan(configs, model_version=model_version)


def _estimate(configs, model_version: str | None = None) -> list:
    from orchestration.defs.biasdora.summary import estimate

    return estimate(configs, model_version=model_version)


def _diff(args, change_tests: list) -> int:
    from orchestration.defs.biasdora.summary import diff

    return diff(args, change_tests, family=NAME)


def t2t_work(config, *, model_version: str | None = None, target: str | None = None, api_key_env: str | None = None):
    """The T2T step of a resolved :class:`~orchestration.defs.biasdora.config.AuditConfig` as a
    :class:`~models_inference.backends.batch_requests.BatchWork` (no model is loaded, no key read):
    what ``dora batch export`` / ``import`` and the dry run's batch pricing rebuild it from."""
    from models_inference.probes.biasdora.t2t import t2t_batch_work
    from orchestration.defs.biasdora.t2t.assets import probe_parts

    templates, backend, probe = probe_parts(config, model_version, {"api_key_env": api_key_env} if api_key_env else None)
    return t2t_batch_work(templates, backend, probe, audit_id=config.audit_id, target=target)


def _judge_unknown(config) -> str:
    return (
        f"one request per significant association x --judge-runs {config.runs}, known once the probes' rows "
        "are built (tf-idf, Fisher's exact test, q-values)"
    )


#: The steps that can run through the Batch API: the T2T probe, and the judge (its requests
#: follow from the associations, so the dry run cannot count them and it is not exported).
BATCH_STEPS = (
    BatchStep("t2t", "BiasDora T2T", "t2t_completions", work=t2t_work),
    BatchStep("judge", "judge", "judge_ratings", unknown=_judge_unknown, backend_flag="--judge-backend"),
)


def _configure_target(target, values: dict, given: dict) -> list[str]:
    return configure_target(target, values, given, FLAGS)


def _reparse(args, home) -> int:
    from orchestration.defs.biasdora.summary import reparse

    return reparse(args, home)


def _report_page(out, audit_id, *, top: int = 15, sections=(), notes=None, drift=None):
    from analytics.report import write_report

    return write_report(out, audit_id=audit_id, top=top, sections=sections, notes=notes, family=FAMILY.name, drift=drift)


FAMILY = ProbeFamily(
    name=NAME,
    title="BiasDora (seed 004): descriptor associations of T2T / T2I / I2T models, Fisher + BH q-values, scored",
    paper="BiasDora (seed 004)",
    modalities="T2T word completion, T2I images, I2T descriptions",
    measures=(
        "descriptor <-> word associations over ~400 CrowS-Pairs descriptors in 9 **bias dimensions**: tf-idf, Fisher's exact test, q-values, then sentiment, toxicity and the judge's Likert bias level"
    ),
    default_audit="on (T2T; the image probes need a diffusion / VLM model)",
    description="The T2T probe (descriptors x settings x letters x runs), the T2I / I2T probes (skipped unless a "
    "reachable model is named; --descriptors / --per-dimension select their descriptors too) and the scoring of "
    "significant associations: sentiment, toxicity, LLM-judge bias level (docs/method.md#4-scoring; offline defaults: "
    "VADER, the Jigsaw BiLSTM of toxic-comment-classifier, the embedded SmolLM2-135M as judge).",
    group=NAME,
    configs=CONFIGS,
    flags=FLAGS,
    flag_prefix="--",
    assets=_assets,
    checks=_checks,
    audit_assets=("landing/t2t_completions", "landing/t2i_images", "landing/i2t_descriptions"),
    adjust=adjust,
    summary=_summary,
    plan=_plan,
    estimate=_estimate,
    diff=_diff,
    diff_help="associations (a word's tf in a descriptor's document); two-sided Fisher change test",
    report_page=_report_page,
    # a registry target's model: the T2T probe's (t2t), the T2I / I2T probe's (t2i / i2t); its
    # `probe` settings, `scorers` and `judges` are BiasDora's (orchestration/defs/biasdora/target.py)
    target_models=TARGET_MODELS,
    target_fields=TARGET_FIELDS,
    configure_target=_configure_target,
    plan_before_run=False,  # its flags' ranges bound its plan; planning T2I loads spaCy (~10 s)
    reparse=_reparse,
    batch_steps=BATCH_STEPS,
    drift=DRIFT,
    legacy_thresholds=legacy_thresholds,
)

"""Counterfactual probe assets (Howard et al., seed 003).

Lineage::

    landing/counterfactual_responses (+ landing/counterfactual_lexicon)   <- text sets on the audit's model
      -> landing/counterfactual_toxicity                                  <- Jigsaw heads of every response
      -> stg/fct counterfactual models (dora_dbt_models)                  -> int_counterfactual_word_pmi
      -> landing/counterfactual_stereotype_flags                          <- App. D.2 filter (judge model)
      -> fct_group_word_pmi (dora_score_models, tag scores)

A partitioned run (a registry target: ``dora audit --target``, the sensor, the schedule) does
not run the counterfactual probe (the assets materialise with ``skipped``); ``enabled=False``
(``dora audit --probe`` without ``counterfactual``) skips it the same way.
"""


import dagster as dg

from ingestion.landing import landing_dir
from ingestion.vocabulary import DEFAULT_MODEL
from models_inference.probes.counterfactual import probe as cf
from models_inference.probes.counterfactual.sets import competence_lexicon, custom_sets, sample_sets
from models_inference.backends.text import load_text_backend
from models_inference.scoring.cache import ScoreCache
from models_inference.scoring.toxicity import load_toxicity_scorer
from ingestion.registry import is_adhoc_partition
from orchestration.defs.audits.runs import run_partition_key
from orchestration.defs.common import skipped_result
from orchestration.defs.counterfactual.config import CounterfactualConfig

RESPONSES = dg.AssetKey(["landing", "counterfactual_responses"])
LEXICON = dg.AssetKey(["landing", "counterfactual_lexicon"])
TOXICITY = dg.AssetKey(["landing", "counterfactual_toxicity"])
FLAGS = dg.AssetKey(["landing", "counterfactual_stereotype_flags"])
PMI = dg.AssetKey("int_counterfactual_word_pmi")
GROUP = "counterfactual"


def _skip_reason(context: dg.AssetExecutionContext, config: CounterfactualConfig):
    if not config.enabled:
        return "counterfactual probe not selected (dora audit --probe)"
    key = run_partition_key(context)
    if key and not is_adhoc_partition(key):  # an ad-hoc audit's partition runs every selected family
        return "registry-target runs audit their target's own probes only"
    return None


def _text_backend(config: CounterfactualConfig, model: str | None = None, backend: str | None = None, base_url=None):
    if backend is None:  # the audited model (else the judge's, with its own endpoint)
        backend, base_url = config.backend, config.base_url
    extra = {"batch_size": config.batch_size} if backend == "transformers" else ({"base_url": base_url} if base_url else {})
    return load_text_backend(model or config.model, backend=backend, defer=True, **extra)


def build_sets(config: CounterfactualConfig):
    """The text sets of a run: user-defined (``custom_occupations``) or a sample of the released ones."""
    if config.custom_occupations:
        return custom_sets(config.custom_occupations, config.subsets)
    return sample_sets(
        config.subsets, occupations=config.occupations, sets_per_occupation=config.sets_per_occupation,
        max_sets=config.max_sets,
    )


def probe_config(config: CounterfactualConfig) -> cf.CounterfactualProbeConfig:
    mitigations = ([None] if config.include_unmitigated else []) + list(config.mitigations)
    return cf.CounterfactualProbeConfig(
        prompts=list(config.prompts), seeds=config.seeds, numeric_seeds=config.numeric_seeds,
        mitigations=mitigations, max_new_tokens=config.max_new_tokens,
        numeric_max_new_tokens=config.numeric_max_new_tokens, temperature=config.temperature, top_p=config.top_p,
        numeric_prompt_style=config.numeric_prompt_style,
    )


@dg.multi_asset(
    name="counterfactual_responses",
    specs=[
        dg.AssetSpec(
            RESPONSES, group_name=GROUP,
            description="Counterfactual responses (Howard et al., seed 003): one row per (set, member, prompt, "
            "mitigation, seed) with member attributes, prompt label, model, version, raw text, status and the "
            "numeric parse (App. F). Text sets: the section 5.1 prefix on a text model. Append-only, resumable.",
        ),
        dg.AssetSpec(LEXICON, group_name=GROUP, description="Competence lexicon (App. E.1) and stop list snapshots."),
    ],
    pool="model_inference",
)
def counterfactual_responses(context: dg.AssetExecutionContext, config: CounterfactualConfig):
    landing_dir("counterfactual_responses")
    reason = _skip_reason(context, config)
    if reason:
        context.log.info(f"counterfactual probe skipped: {reason}")
        yield skipped_result(reason, asset_key=RESPONSES)
        yield skipped_result(reason, asset_key=LEXICON, rows_key=None)
        return
    lexicon = competence_lexicon(config.lexicon)
    lexicon_rows = cf.land_lexicons(lexicon)  # (and the lexicon file's unread lines, in input_quarantine)
    sets = build_sets(config)
    backend = _text_backend(config)
    summary = cf.run_text_sets(sets, backend, probe_config(config), audit_id=config.audit_id, progress=config.progress,
                               max_error_share=config.max_error_share)
    context.log.info(f"counterfactual audit {summary.audit_id}: generated {summary.generated} of {summary.planned} responses")
    yield dg.MaterializeResult(
        asset_key=RESPONSES,
        metadata={
            "audit_id": summary.audit_id,
            "variant": "text",
            "model_id": backend.model_id,
            "model_version": backend.model_version,
            "sets": len(sets),
            "rows_planned": summary.planned,
            "rows_already_landed": summary.already_landed,
            "rows_generated": summary.generated,
            "status": dg.MetadataValue.json(dict(summary.statuses)),
            "max_new_tokens": config.max_new_tokens,
            "rows_quarantined": len(lexicon.quarantined),
        },
    )
    yield dg.MaterializeResult(asset_key=LEXICON, metadata={"rows": lexicon_rows})


@dg.multi_asset(
    name="counterfactual_toxicity",
    specs=[
        dg.AssetSpec(
            TOXICITY, deps=[RESPONSES], group_name=GROUP,
            description="Toxicity heads of every counterfactual response (offline: the Jigsaw BiLSTM of "
            "toxic-comment-classifier; toxic, severe_toxic, obscene, threat, insult, identity_hate). "
            "Stands in for the paper's Perspective API (absolute values not comparable).",
        )
    ],
    pool="model_inference",
)
def counterfactual_toxicity(context: dg.AssetExecutionContext, config: CounterfactualConfig):
    landing_dir("counterfactual_toxicity")
    reason = _skip_reason(context, config)
    if reason:
        yield skipped_result(reason, asset_key=TOXICITY, rows_key="rows_scored")
        return
    scorer = load_toxicity_scorer(config.toxicity_scorer)
    summary = cf.score_toxicity(None, scorer, ScoreCache())
    yield dg.MaterializeResult(
        asset_key=TOXICITY,
        metadata={"scorer": scorer.name, "scorer_version": scorer.version, "rows_scored": summary.scored,
                  "already_scored": summary.already_scored, "cache_hits": summary.cache_hits},
    )


def pmi_candidates(audit_id=None, top: int = 50) -> dict:
    """The candidate words (s(w) >= 1, freq >= min-freq) of each (audit, subset, group), by
    descending s(w), at most ``top`` per group (the paper validated the top 50), read-only."""
    from analytics.query import WarehouseMissingError, connect_read_only

    try:
        con = connect_read_only()
    except WarehouseMissingError:  # nothing built yet: no PMI list to judge
        return {}
    try:
        tables = {r[0] for r in con.sql("select table_name from information_schema.tables").fetchall()}
        if "int_counterfactual_word_pmi" not in tables:
            return {}
        sql = """
            select audit_id, subset, group_label, list(word order by s_w desc, freq_group desc, word) as words
            from int_counterfactual_word_pmi
            where is_candidate and (? is null or audit_id = ?)
            group by all
        """
        rows = con.execute(sql, [audit_id, audit_id]).fetchall()
    finally:
        con.close()
    return {(a, s, g): list(ws)[:top] for a, s, g, ws in rows}


@dg.multi_asset(
    name="counterfactual_stereotype_filter",
    specs=[
        dg.AssetSpec(
            FLAGS, deps=[PMI], group_name=GROUP,
            description="Stereotype filter (App. D.2, prompts verbatim, 3 answers per group, union, "
            "hallucinated words dropped) of each group's PMI word list, through the judge model "
            "(default: the embedded SmolLM2; the paper: GPT-4-turbo / GPT-4o).",
        )
    ],
    pool="model_inference",
)
def counterfactual_stereotype_filter(context: dg.AssetExecutionContext, config: CounterfactualConfig):
    landing_dir("counterfactual_stereotype_flags")
    reason = _skip_reason(context, config) or ("judge backend none" if config.judge_backend == "none" else None)
    if reason:
        yield skipped_result(reason, asset_key=FLAGS, rows_key="answers")
        return
    candidates = pmi_candidates()
    if config.judge_backend == "openai":
        judge = _text_backend(config, config.judge_model or "gpt-4o", "openai", config.judge_base_url)
    else:
        judge = _text_backend(config, config.judge_model or (config.model if config.backend == "transformers" else DEFAULT_MODEL), "transformers")
    summary = cf.run_stereotype_filter(candidates, judge, max_new_tokens=config.judge_max_new_tokens,
                                       max_error_share=config.max_error_share)
    yield dg.MaterializeResult(
        asset_key=FLAGS,
        metadata={"groups_with_candidates": summary.groups, "answers": summary.answers,
                  "parse_status": dg.MetadataValue.json(dict(summary.statuses)), "judge_model": judge.model_id},
    )


counterfactual_assets = [counterfactual_responses, counterfactual_toxicity, counterfactual_stereotype_filter]

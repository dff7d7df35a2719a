"""Scoring assets (METHOD.md section 4): sentiment, toxicity and LLM-judge bias levels of the
significant associations, and the score marts built from them.

Lineage (the dagster-open-platform way: the dbt project is split into two ``@dbt_assets``
by selection, so Python scoring can sit between dbt models)::

    fct_associations (dora_dbt_models, everything but tag:scores)
      -> landing/sentiment_scores, landing/toxicity_scores, landing/judge_ratings (Python)
      -> stg_*_scores, stg_judge_ratings -> fct_association_scores -> agg_bias_by_dimension
         (dora_score_models, select tag:scores)

Each scorer reads ``fct_associations`` read-only, scores only what has not landed for the
same scorer version, and lands Parquet; with no significant association it lands nothing
and still succeeds.
"""

import dagster as dg
from dagster_dbt import DbtCliResource, dbt_assets

from ingestion.landing import landing_dir
from models_inference.judge import JudgeSampling, load_judge, run_judge
from models_inference.scorers import (
    ScoreCache,
    associations_to_score,
    load_sentiment_scorer,
    load_toxicity_scorer,
    run_scoring,
)
from orchestration.defs.dbt.assets import TRANSLATOR
from orchestration.defs.dbt.resources import dbt_env, dbt_project
from orchestration.defs.scoring.config import JudgeConfig, SentimentConfig, ToxicityConfig

#: dbt tag of the models built after scoring (set in their YAML).
SCORES_TAG = "scores"
FCT_ASSOCIATIONS = dg.AssetKey("fct_associations")


def _score(context: dg.AssetExecutionContext, config, table: str, load) -> dg.MaterializeResult:
    landing_dir(table)  # the dbt source glob must exist even when nothing lands
    assocs = associations_to_score(score_all=config.score_all, audit_id=config.audit_id)
    meta = {"associations_selected": len(assocs), "significant_only": not config.score_all}
    if not assocs:
        context.log.info(f"{table}: no association to score")
        return dg.MaterializeResult(asset_key=["landing", table], metadata={**meta, "rows_scored": 0})
    scorer = load(config.scorer, batch_size=config.batch_size)
    summary = run_scoring(scorer, assocs, cache=ScoreCache(), batch_size=config.batch_size)
    context.log.info(f"{table}: scored {summary.scored} associations with {scorer.name} ({summary.cache_hits} from cache)")
    return dg.MaterializeResult(
        asset_key=["landing", table],
        metadata={
            **meta,
            "scorer": scorer.name,
            "scorer_version": scorer.version,
            "rows_scored": summary.scored,
            "rows_already_landed": summary.already_landed,
            "cache_hits": summary.cache_hits,
            "by_label": dg.MetadataValue.json(dict(summary.by_label)),
        },
    )


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            ["landing", "sentiment_scores"],
            deps=[FCT_ASSOCIATIONS],
            group_name="scoring",
            description="Sentiment (label negative/neutral/positive, signed score) of each significant "
            "association's sentence (METHOD.md section 4); offline default VADER, or a transformers "
            "model by id (paper: SST-2 DistilBERT). Append-only Parquet, one row per association and scorer version.",
        )
    ],
    pool="model_inference",
)
def sentiment_scores(context: dg.AssetExecutionContext, config: SentimentConfig):
    yield _score(context, config, "sentiment_scores", load_sentiment_scorer)


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            ["landing", "toxicity_scores"],
            deps=[FCT_ASSOCIATIONS],
            group_name="scoring",
            description="Toxicity (probability, label at 0.5) of each significant association's sentence "
            "(METHOD.md section 4); offline default the Jigsaw-trained BiLSTM of toxic-comment-classifier, "
            "or a transformers model by id (paper: s-nlp/roberta-toxicity_classifier).",
        )
    ],
    pool="model_inference",
)
def toxicity_scores(context: dg.AssetExecutionContext, config: ToxicityConfig):
    yield _score(context, config, "toxicity_scores", load_toxicity_scorer)


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            ["landing", "judge_ratings"],
            deps=[FCT_ASSOCIATIONS],
            group_name="scoring",
            description="LLM-judge bias levels (5-point Likert, the paper's prompts; METHOD.md section 4) of "
            "each significant association: k repeats, each kept with raw answer and parse status, and the "
            "probability of each rating where the backend gives log-probabilities. Default judge: the "
            "embedded SmolLM2-135M-Instruct; any OpenAI-compatible endpoint (paper: GPT-4o).",
        )
    ],
    pool="model_inference",
)
def judge_ratings(context: dg.AssetExecutionContext, config: JudgeConfig):
    landing_dir("judge_ratings")
    assocs = associations_to_score(score_all=config.score_all, audit_id=config.audit_id) if config.enabled else []
    meta = {"associations_selected": len(assocs), "significant_only": not config.score_all, "enabled": config.enabled}
    if not assocs:
        yield dg.MaterializeResult(asset_key=["landing", "judge_ratings"], metadata={**meta, "rows_judged": 0})
        return
    extra = {"batch_size": config.batch_size} if config.backend == "transformers" else {}
    judge = load_judge(config.backend, config.model, base_url=config.base_url, answer_mode=config.answer_mode, **extra)
    sampling = JudgeSampling(temperature=config.temperature, max_new_tokens=config.max_new_tokens)
    summary = run_judge(assocs, judge, repeats=config.repeats, sampling=sampling, progress=config.progress)
    context.log.info(f"judge {judge.model_id}: {summary.judged} ratings, parse rate {summary.parse_rate:.1%}")
    yield dg.MaterializeResult(
        asset_key=["landing", "judge_ratings"],
        metadata={
            **meta,
            "judge_backend": judge.backend_name,
            "judge_model": judge.model_id,
            "judge_model_version": judge.model_version,
            "answer_mode": getattr(judge, "answer_mode", "free"),
            "repeats": config.repeats,
            "rows_judged": summary.judged,
            "rows_already_landed": summary.already_landed,
            "parse_rate": dg.MetadataValue.float(round(summary.parse_rate, 4)),
            "parse_status": dg.MetadataValue.json(dict(summary.parse_status)),
            "ratings": dg.MetadataValue.json({str(k): v for k, v in sorted(summary.ratings.items())}),
        },
    )


@dbt_assets(
    manifest=dbt_project().manifest_path,
    project=dbt_project(),
    dagster_dbt_translator=TRANSLATOR,
    select=f"tag:{SCORES_TAG}",
    name="dora_score_models",
    pool="duckdb_writer",
)
def dora_score_models(context: dg.AssetExecutionContext, dbt: DbtCliResource):
    """``dbt build`` of the score models (tag ``scores``): staging of the three score tables,
    ``fct_association_scores`` and ``agg_bias_by_dimension``, with their tests as asset checks."""
    dbt_env()
    yield from dbt.cli(["build"], context=context).stream()


scoring_assets = [sentiment_scores, toxicity_scores, judge_ratings, dora_score_models]

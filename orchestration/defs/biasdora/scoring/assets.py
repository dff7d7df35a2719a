"""Scoring assets (docs/method.md#4-scoring): sentiment, toxicity and LLM-judge bias levels of the
significant associations, and the score marts built from them.

Lineage (the dagster-open-platform way: the dbt project is split into two ``@dbt_assets``
by selection, so Python scoring can sit between dbt models)::

    fct_associations (dora_dbt_models, everything but tag:scores)
      -> landing/sentiment_scores, landing/toxicity_scores, landing/judge_ratings (Python)
      -> stg_*_scores, stg_judge_ratings -> fct_association_scores -> agg_bias_by_dimension
         (dora_score_models, select tag:scores)

Each scorer reads ``fct_associations_to_score`` (a dbt mart over ``fct_associations``, a view) read-only, scores only what has not landed for the
same scorer version, and lands Parquet; with no significant association it lands nothing
and still succeeds.

Registry targets: in a partitioned run (``<target>@<version>``: ``dora audit --target``, the
sensor, the schedule) each scorer scores only if its registry name (sentiment, toxicity,
bias_level) is in the target's ``scorers`` list, and only the associations of that
partition's audits (:func:`orchestration.defs.audits.runs.partition_audit_ids`) in the
target's modality and version. A scorer the target does not list lands nothing and
materialises with ``skipped: "not in target scorers"``. Ad-hoc runs score every audit.
"""

from dataclasses import dataclass
from typing import Callable

import dagster as dg
from dagster_dbt import DbtCliResource

from analytics.query import read_relation
from ingestion.landing import landing_dir
from ingestion.vocabulary import ASSOCIATION_KEY
from models_inference.probes.biasdora.judge import JudgeSampling, judge_associations, load_judge
from models_inference.probes.biasdora.scoring import score_associations, with_association_text
from models_inference.scoring.cache import ScoreCache
from models_inference.scoring.sentiment import load_sentiment_scorer
from models_inference.scoring.toxicity import load_toxicity_scorer
from orchestration.defs.audits.runs import partition_audit_ids, target_of_run
from orchestration.defs.biasdora.scoring.config import JudgeConfig, SentimentConfig, ToxicityConfig
from orchestration.defs.common import batch_options
from orchestration.defs.dbt.assets import DBT_STEPS, build_unless_unchanged, dora_dbt_assets
from orchestration.instance import MODEL_INFERENCE_POOL

#: dbt tag of the models built after scoring (set in their YAML).
SCORES_TAG = "scores"
SCORING_INPUT = dg.AssetKey("fct_associations_to_score")
#: Metadata ``skipped`` of a scorer that a partition's registry target does not list.
NOT_IN_TARGET_SCORERS = "not in target scorers"


#: The dbt mart listing the associations to score (dbt_project/models/marts/biasdora/).
ASSOCIATIONS_TO_SCORE = "fct_associations_to_score"


#: Which associations are scored: ``fisher`` = Fisher q < 0.05 (dora's default),
#: ``paper`` = the paper's p-value-significant pool (``is_paper_significant``, docs/method.md#3a-paper-statistics),
#: ``all`` = every association.
SCORE_POOLS: tuple[str, ...] = ("fisher", "paper", "all")
_POOL_FILTER = {"fisher": {"is_significant": True}, "paper": {"is_paper_significant": True}, "all": {}}


def associations_to_score(*, score_all: bool = False, audit_id: str | None = None, score_pool: str | None = None) -> list[dict]:
    """The associations to score (``score_pool``: fisher (default) / paper / all; ``score_all``
    means all; one audit or all), read from the dbt model :data:`ASSOCIATIONS_TO_SCORE` with
    parameterised filters, ordered by association key, each with its sentence ``text``, the
    target as the setting words it for the judge (``judge_target``) and ``score_pool``.

    Raises:
        ValueError: an unknown pool. analytics.query.WarehouseMissingError: no warehouse yet.
    """
    pool = "all" if score_all else (score_pool or "fisher")
    if pool not in SCORE_POOLS:
        raise ValueError(f"score_pool must be one of {SCORE_POOLS}, got {score_pool!r}")
    filters: dict = dict(_POOL_FILTER[pool])
    if audit_id:
        filters["audit_id"] = audit_id
    columns = [*ASSOCIATION_KEY, "bias_dimensions", "subject", "prefix", "association_text", "baseline_text"]
    rows = read_relation(ASSOCIATIONS_TO_SCORE, columns=columns, filters=filters, order_by=ASSOCIATION_KEY)
    return [{**r, "score_pool": pool} for r in with_association_text(rows)]


@dataclass(frozen=True)
class ScorerSpec:
    """One scoring asset: its landing table, registry scorer name and what it does per run.

    Attributes:
        table: landing table and op name (``sentiment_scores``, ...).
        registry_name: its name in a registry target's ``scorers`` list.
        rows_key: metadata key of the rows it landed (``rows_scored`` / ``rows_judged``).
        config_class: its run config (Dagster ``Config``).
        description: the asset description shown in the UI.
        score: ``(context, config, associations) -> metadata`` of a run with associations.
    """

    table: str
    registry_name: str
    rows_key: str
    config_class: type
    description: str
    score: Callable[[dg.AssetExecutionContext, dg.Config, list[dict]], dict]


def associations_in_scope(context: dg.AssetExecutionContext, config, spec: ScorerSpec) -> tuple[list[dict], dict]:
    """The associations this scorer scores in this run, and the metadata saying which.

    Ad-hoc run: every audit's (or ``config.audit_id``'s). Partitioned run: none unless
    ``spec.registry_name`` is in the target's ``scorers`` (metadata ``skipped`` says so);
    otherwise the partition's audits' associations of the target's modality and version.

    Raises:
        RegistryError / KeyError: invalid registry or unknown target (see ``target_of_run``).
        analytics.query.WarehouseMissingError: no warehouse yet.
    """
    enabled = getattr(config, "enabled", True)
    pool = "all" if config.score_all else config.score_pool
    meta: dict = {"significant_only": pool != "all", "score_pool": pool}
    if hasattr(config, "enabled"):
        meta["enabled"] = enabled
    run = target_of_run(context, config.registry)
    if run is None:
        assocs = associations_to_score(score_pool=pool, audit_id=config.audit_id) if enabled else []
        return assocs, {**meta, "associations_selected": len(assocs)}
    target = run.target
    meta.update(
        target=target.name,
        model_version=run.model_version,
        target_scorers=dg.MetadataValue.json(list(target.scorers)),
    )
    if spec.registry_name not in target.scorers:
        context.log.info(
            f"{spec.table}: skipped, {spec.registry_name!r} is not in the scorers {list(target.scorers)} of "
            f"registry target {target.name!r} ({run.registry})"
        )
        return [], {**meta, "skipped": NOT_IN_TARGET_SCORERS, "associations_selected": 0}
    audit_ids = [a for a in partition_audit_ids(target.name, run.model_version) if config.audit_id in (None, a)]
    assocs = []
    if enabled:
        for audit_id in audit_ids:
            assocs += [
                a
                for a in associations_to_score(score_pool=pool, audit_id=audit_id)
                if a["modality"] == target.modality and a["model_version"] == run.model_version
            ]
    meta.update(audit_ids=dg.MetadataValue.json(audit_ids), associations_selected=len(assocs))
    return assocs, meta


def scoring_asset(spec: ScorerSpec) -> dg.AssetsDefinition:
    """The scoring asset of ``spec``: key ``landing/<table>``, group ``scoring``, after
    ``fct_associations_to_score``, op ``<table>`` (its run config: ``ops.<table>.config``), pool
    ``model_inference``. It lands nothing (and succeeds) when nothing is in scope."""

    @dg.multi_asset(
        name=spec.table,
        specs=[dg.AssetSpec(["landing", spec.table], deps=[SCORING_INPUT], group_name="biasdora", description=spec.description)],
        pool=MODEL_INFERENCE_POOL,
    )
    def _scoring(context: dg.AssetExecutionContext, config: spec.config_class):  # type: ignore[valid-type]
        landing_dir(spec.table)  # the dbt source glob must exist even when nothing lands
        assocs, meta = associations_in_scope(context, config, spec)
        if not assocs:
            context.log.info(f"{spec.table}: no association to score")
            yield dg.MaterializeResult(asset_key=["landing", spec.table], metadata={**meta, spec.rows_key: 0})
            return
        yield dg.MaterializeResult(asset_key=["landing", spec.table], metadata={**meta, **spec.score(context, config, assocs)})

    return _scoring


def _text_scorer(table: str, load) -> Callable:
    """``score`` of a sentence scorer (sentiment / toxicity): load it, score, land, report."""

    def score(context: dg.AssetExecutionContext, config, assocs: list[dict]) -> dict:
        scorer = load(config.scorer, batch_size=config.batch_size)
        summary = score_associations(scorer, assocs, cache=ScoreCache(), batch_size=config.batch_size)
        context.log.info(f"{table}: scored {summary.generated} associations with {scorer.name} ({summary.cache_hits} from cache)")
        return {
            "scorer": scorer.name,
            "scorer_version": scorer.version,
            "rows_scored": summary.generated,
            "rows_already_landed": summary.already_landed,
            "cache_hits": summary.cache_hits,
            "by_label": dg.MetadataValue.json(dict(summary.statuses)),
        }

    return score


def judge_models(config: JudgeConfig, target=None) -> list[str | None]:
    """The judge models of a run: the registry target's ``judges`` in a partitioned
    run when it lists any, else ``--judge-model`` split at commas, else ``[None]`` (the backend's
    default judge). Several judges each judge every association (agg_judge_agreement)."""
    listed = list(getattr(target, "judges", None) or [])
    if not listed:
        listed = [m.strip() for m in (config.model or "").split(",") if m.strip()]
    return listed or [None]


def _judge(context: dg.AssetExecutionContext, config: JudgeConfig, assocs: list[dict]) -> dict:
    extra = {"batch_size": config.batch_size} if config.backend == "transformers" else {}
    sampling = JudgeSampling(temperature=config.temperature, max_new_tokens=config.max_new_tokens)
    per_judge = []
    # several judges (registry `judges:` or --judge-model a,b), one after the other
    run = target_of_run(context, config.registry)
    for model in judge_models(config, run.target if run else None):
        judge = load_judge(config.backend, model, base_url=config.base_url, answer_mode=config.answer_mode, **extra)
        summary = judge_associations(
            assocs,
            judge,
            runs=config.runs,
            sampling=sampling,
            progress=config.progress,
            max_error_share=config.max_error_share,
            batch=batch_options(config, "judge") if config.backend == "openai" else None,
        )
        context.log.info(f"judge {judge.model_id}: {summary.generated} ratings, answer mode {judge.mode_used}, rated {summary.parse_rate:.1%}")
        per_judge.append((judge, summary))
    judge, summary = per_judge[0]
    meta = {
        "judge_backend": judge.backend_name,
        "judge_model": judge.model_id,
        "judge_model_version": judge.model_version,
        "answer_mode": judge.mode_used,
        # the share of this run's judgements that are a rating (parse status ok)
        "rated_share": dg.MetadataValue.float(round(summary.parse_rate, 4)),
        "runs": config.runs,
        "rows_judged": sum(s.generated for _, s in per_judge),
        "rows_already_landed": sum(s.already_landed for _, s in per_judge),
        "parse_rate": dg.MetadataValue.float(round(summary.parse_rate, 4)),
        "parse_status": dg.MetadataValue.json(dict(summary.statuses)),
        "ratings": dg.MetadataValue.json({str(k): v for k, v in sorted(summary.ratings.items())}),
    }
    caps = getattr(judge.backend, "capabilities", None)
    found = caps() if callable(caps) and summary.generated else None
    if found is not None:  # what the endpoint's capability probe found (recorded on the audit)
        meta["server_capabilities"] = dg.MetadataValue.json(found.as_dict())
    pending = sum(getattr(s, "pending", 0) for _, s in per_judge)
    if pending:  # (--api-batch) judgements in batches still open: the next run lands them
        meta["batch_pending"] = pending
    if len(per_judge) > 1:
        meta["judges"] = dg.MetadataValue.json({j.model_id: {"rows_judged": s.generated, "parse_rate": round(s.parse_rate, 4)} for j, s in per_judge})
    return meta


SENTIMENT = ScorerSpec(
    "sentiment_scores",
    "sentiment",
    "rows_scored",
    SentimentConfig,
    "Sentiment (label negative/neutral/positive, signed score) of each significant "
    "association's sentence (docs/method.md#4-scoring); offline default VADER, or a transformers "
    "model by id (paper: SST-2 DistilBERT). Append-only Parquet, one row per association and scorer version.",
    _text_scorer("sentiment_scores", load_sentiment_scorer),
)
TOXICITY = ScorerSpec(
    "toxicity_scores",
    "toxicity",
    "rows_scored",
    ToxicityConfig,
    "Toxicity (probability, label at 0.5) of each significant association's sentence "
    "(docs/method.md#4-scoring); offline default the Jigsaw-trained BiLSTM of toxic-comment-classifier, "
    "or a transformers model by id (paper: s-nlp/roberta_toxicity_classifier).",
    _text_scorer("toxicity_scores", load_toxicity_scorer),
)
JUDGE = ScorerSpec(
    "judge_ratings",
    "bias_level",
    "rows_judged",
    JudgeConfig,
    "LLM-judge bias levels (5-point Likert, the paper's prompts; docs/method.md#4-scoring) of "
    "each significant association: k runs, each kept with raw answer and parse status, and the "
    "probability of each rating where the backend gives log-probabilities. Default judge: the "
    "embedded SmolLM2-135M-Instruct; any OpenAI-compatible endpoint (paper: GPT-4o).",
    _judge,
)

sentiment_scores = scoring_asset(SENTIMENT)
toxicity_scores = scoring_asset(TOXICITY)
judge_ratings = scoring_asset(JUDGE)


@dora_dbt_assets(select=f"tag:{SCORES_TAG}", name="dora_score_models")
def dora_score_models(context: dg.AssetExecutionContext, dbt: DbtCliResource):
    """``dbt build`` of the score models (tag ``scores``): staging of the three score tables,
    ``fct_association_scores`` and ``agg_bias_by_dimension``, with their tests as asset checks.
    Skipped when nothing new landed (:func:`orchestration.defs.dbt.assets.build_unless_unchanged`)."""
    yield from build_unless_unchanged(context, dbt, DBT_STEPS[1])


scoring_assets = [sentiment_scores, toxicity_scores, judge_ratings, dora_score_models]

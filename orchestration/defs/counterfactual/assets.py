"""Counterfactual probe assets (Howard et al., seed 003).

Lineage::

    landing/counterfactual_responses (+ landing/counterfactual_lexicon)   <- text sets on the audit's model;
                                                                          image sets (--cf-images) on the LVLM
      -> landing/counterfactual_toxicity                                  <- Jigsaw heads of every response
      -> stg/fct counterfactual models (dora_dbt_models)                  -> int_counterfactual_word_pmi
      -> landing/counterfactual_stereotype_flags                          <- App. D.2 filter (judge model)
      -> fct_group_word_pmi (dora_score_models, tag scores)

A partitioned run (a registry target: ``dora audit --target``, the sensor, the schedule) runs
the probe when the target's family is ``counterfactual`` (its options in the run config, the
text model's version pinned to the partition's, audits tagged with the target), and skips it
(``skipped``) for another family's target; ``enabled=False`` (``dora audit --family`` without
``counterfactual``) skips it the same way.
"""

from collections import Counter

import dagster as dg

from ingestion.landing import landing_dir
from ingestion.vocabulary import DEFAULT_MODEL
from models_inference.backends.text import load_text_backend
from models_inference.backends.vision import load_vision_backend
from models_inference.probes.counterfactual import probe as cf
from models_inference.probes.counterfactual.errors import CounterfactualInputError
from models_inference.probes.counterfactual.scoring import apply_stereotype_filter, land_lexicons, score_toxicity
from models_inference.probes.counterfactual.sets import competence_lexicon, custom_sets, load_image_sets, sample_sets
from models_inference.resumable import finish_blocks
from models_inference.scoring.cache import ScoreCache
from models_inference.scoring.toxicity import load_toxicity_scorer
from orchestration.defs.audits.runs import family_skip_reason, target_of_run, with_model_version
from orchestration.defs.common import batch_options, block_outputs, same_config, skipped_metadata, skipped_result
from orchestration.defs.counterfactual.config import CounterfactualConfig
from orchestration.instance import MODEL_INFERENCE_POOL

RESPONSES = dg.AssetKey(["landing", "counterfactual_responses"])
LEXICON = dg.AssetKey(["landing", "counterfactual_lexicon"])
TOXICITY = dg.AssetKey(["landing", "counterfactual_toxicity"])
FLAGS = dg.AssetKey(["landing", "counterfactual_stereotype_flags"])
PMI = dg.AssetKey("int_counterfactual_word_pmi")
GROUP = "counterfactual"


def _skip_reason(context: dg.AssetExecutionContext, config: CounterfactualConfig):
    # a registry partition whose run does not run the family first (its run request turns it off too)
    reason = family_skip_reason(context, GROUP)
    return reason or (None if config.enabled else "counterfactual probe not selected (dora audit --family)")


def _op(name: str, *specs: tuple):
    """The multi-asset of one counterfactual op: ``specs`` are (key, description, deps) of its
    assets, all in the family's group; it calls models, so it runs in the model pool."""
    return dg.multi_asset(
        name=name,
        specs=[dg.AssetSpec(key, deps=list(deps), group_name=GROUP, description=text) for key, text, deps in specs],
        pool=MODEL_INFERENCE_POOL,
    )


def _skipped(
    context: dg.AssetExecutionContext, config: CounterfactualConfig, table: str, empty: dict, reason: str | None = None
) -> list[dg.MaterializeResult]:
    """Start an op: its landing table's folder exists (dbt reads it); when the op does not run
    (:func:`_skip_reason`, else ``reason``), one result per asset of ``empty`` (asset key ->
    its zero counts) saying why; an empty list when it runs."""
    landing_dir(table)
    reason = _skip_reason(context, config) or reason
    if not reason:
        return []
    context.log.info(f"{table} skipped: {reason}")
    return [skipped_result(reason, asset_key=key, rows_key=None, **zeros) for key, zeros in empty.items()]


def _text_backend(config: CounterfactualConfig, model: str | None = None, backend: str | None = None, base_url=None, api_key_env: str | None = None):
    if backend is None:  # the audited model (else the judge's, with its own endpoint)
        backend, base_url = config.backend, config.base_url
    extra = {"batch_size": config.batch_size} if backend == "transformers" else ({"base_url": base_url} if base_url else {})
    if api_key_env and backend == "openai":
        extra["api_key_env"] = api_key_env
    return load_text_backend(model or config.model, backend=backend, defer=True, **extra)


def build_image_sets(config: CounterfactualConfig):
    """The image sets of a run (``images``: folder or manifest), or ``None`` without ``images``.

    Raises:
        CounterfactualInputError: ``images`` without ``vision_model``, or an unusable folder / manifest.
    """
    if not config.images:
        return None
    if not config.vision_model:
        raise CounterfactualInputError("--cf-images needs --cf-vision-model (the LVLM shown the images)")
    return load_image_sets(config.images)


def build_sets(config: CounterfactualConfig, image_sets=None):
    """The text sets of a run: the image sets' own sets (``images`` with ``paired_text``: the
    section 5.1 pairing), none (``images`` without ``paired_text``), user-defined
    (``custom_occupations``) or a sample of the released ones."""
    if image_sets is not None:
        return list(image_sets) if config.paired_text else []
    if config.custom_occupations:
        return custom_sets(config.custom_occupations, config.subsets)
    return sample_sets(
        config.subsets,
        occupations=config.occupations,
        sets_per_occupation=config.sets_per_occupation,
        max_sets=config.max_sets,
    )


def probe_config(config: CounterfactualConfig) -> cf.CounterfactualProbeConfig:
    mitigations = ([None] if config.include_unmitigated else []) + list(config.mitigations)
    return cf.CounterfactualProbeConfig(
        prompts=list(config.prompts),
        runs=config.runs,
        numeric_runs=config.numeric_runs,
        mitigations=mitigations,
        max_new_tokens=config.max_new_tokens,
        numeric_max_new_tokens=config.numeric_max_new_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        numeric_prompt_style=config.numeric_prompt_style,
    )


RESPONSE_OPS = ("counterfactual_sets", "counterfactual_block", "counterfactual_finish")


@dg.op(
    out={"blocks": dg.DynamicOut(dict), "lexicon_rows": dg.Out(int)},
    description="Land the lexicons; split the text sets into blocks of --cf-block-sets.",
)
def counterfactual_sets(context: dg.OpExecutionContext, config: CounterfactualConfig):
    landing_dir("counterfactual_responses")
    reason = _skip_reason(context, config)
    if reason:  # one empty block: the fan-in step reports the skip
        yield from block_outputs("sets", 0, 1, output_name="blocks")
        yield dg.Output(0, "lexicon_rows")
        return
    lexicon = competence_lexicon(config.lexicon)
    rows = land_lexicons(lexicon)  # (and the lexicon file's unread lines, in input_quarantine)
    sets = build_sets(config, build_image_sets(config))  # (image sets without paired text: no text set)
    # batch mode: one step holds the audit's batches (its ledger), as the model runs at the API
    batched = config.api_batch and config.backend == "openai"
    yield from block_outputs("sets", len(sets), max(1, len(sets)) if batched else config.block_sets, output_name="blocks")
    yield dg.Output(rows, "lexicon_rows")


@dg.op(pool=MODEL_INFERENCE_POOL, description="Generate and land the missing responses of one block of text sets.")
def counterfactual_block(context: dg.OpExecutionContext, config: CounterfactualConfig, block: dict) -> dict:
    if block["stop"] == block["start"]:
        return {"generated": 0}
    sets = build_sets(config, build_image_sets(config))[block["start"] : block["stop"]]
    run = target_of_run(context, require_current=True)  # a registry partition of a counterfactual target
    # the target's model is the audited one: on an API, with the key of its api_key_env
    backend = _text_backend(config, api_key_env=run and run.target.api_key_env)
    if run is not None:
        backend = with_model_version(backend, run.model_version)
    batch = (
        batch_options(config, "counterfactual_text", model_version=backend.model_version, target=run and run.target.name)
        if config.backend == "openai"
        else None
    )
    summary = cf.probe_text_sets(
        sets,
        backend,
        probe_config(config),
        audit_id=config.audit_id,
        progress=config.progress,
        max_error_share=config.max_error_share,
        target=run and run.target.name,
        block=f"sets-{block['start']}-{block['stop']}",
        batch=batch,
    )
    context.log.info(
        f"counterfactual audit {summary.audit_id}, sets {block['start']}-{block['stop']}: generated "
        f"{summary.generated} of {summary.planned} responses"
    )
    return {
        "audit_id": summary.audit_id,
        "planned": summary.planned,
        "already_landed": summary.already_landed,
        "generated": summary.generated,
        "statuses": dict(summary.statuses),
        "sets": len(sets),
        "model_id": backend.model_id,
        "model_version": backend.model_version,
        "pending": summary.pending,
    }


@dg.op(
    out={"responses": dg.Out(dg.Nothing), "lexicon": dg.Out(dg.Nothing)},
    description="Once every text block has landed: the audit's finished event, the image sets (one step), the asset metadata.",
)
def counterfactual_finish(context: dg.OpExecutionContext, config: CounterfactualConfig, blocks: list[dict], lexicon_rows: int):
    reason = _skip_reason(context, config)
    if reason:
        context.log.info(f"counterfactual probe skipped: {reason}")
        yield dg.Output(None, "responses", metadata=skipped_metadata(reason, rows_key=None, rows_generated=0))
        yield dg.Output(None, "lexicon", metadata=skipped_metadata(reason, rows_key=None))
        return
    lexicon = competence_lexicon(config.lexicon)
    image_sets = build_image_sets(config)
    done = [b for b in blocks if "audit_id" in b]
    metadata = {
        "max_new_tokens": config.max_new_tokens,
        "rows_quarantined": len(lexicon.quarantined),
        "sets": sum(b["sets"] for b in done),
        "blocks": len(done),
    }
    if done:
        statuses: Counter = Counter()
        for b in done:
            statuses.update(b["statuses"])
        total = {k: sum(b[k] for b in done) for k in ("planned", "already_landed", "generated")}
        pending = sum(b.get("pending", 0) for b in done)
        if pending:  # (--api-batch) an audit with open batches is not finished: the next run lands them
            metadata["batch_pending"] = pending
        else:
            finish_blocks(done[0]["audit_id"], total["generated"])
        context.log.info(
            f"counterfactual audit {done[0]['audit_id']}: generated {total['generated']} of {total['planned']} responses in {len(done)} block(s)"
        )
        metadata.update(
            {
                "audit_id": done[0]["audit_id"],
                "variant": "text",
                "model_id": done[0]["model_id"],
                "model_version": done[0]["model_version"],
                "rows_planned": total["planned"],
                "rows_already_landed": total["already_landed"],
                "rows_generated": total["generated"],
                "status": dg.MetadataValue.json(dict(statuses)),
            }
        )
    if image_sets is not None:  # the image sets (an LVLM on the dataset's images) run in this one step
        run = target_of_run(context, require_current=True)
        kwargs = {"base_url": config.vision_base_url} if config.vision_backend == "openai" and config.vision_base_url else {}
        if config.vision_backend == "transformers":
            kwargs["batch_size"] = config.vision_batch_size
        vlm = load_vision_backend(config.vision_model, backend=config.vision_backend, **kwargs)
        image = cf.probe_image_sets(
            image_sets, vlm, probe_config(config), progress=config.progress, max_error_share=config.max_error_share, target=run and run.target.name
        )
        context.log.info(f"counterfactual image audit {image.audit_id}: generated {image.generated} of {image.planned} responses")
        metadata.update(
            {
                "image_audit_id": image.audit_id,
                "image_model_id": vlm.model_id,
                "image_model_version": vlm.model_version,
                "image_sets": len(image_sets),
                "image_rows_planned": image.planned,
                "image_rows_generated": image.generated,
                "image_status": dg.MetadataValue.json(dict(image.statuses)),
                "image_rows_quarantined": len(image_sets.quarantined),
            }
        )
    metadata.setdefault("rows_generated", 0)
    yield dg.Output(None, "responses", metadata=metadata)
    yield dg.Output(None, "lexicon", metadata={"rows": lexicon_rows})


@dg.graph_multi_asset(
    group_name=GROUP,
    name="counterfactual_responses",
    outs={
        "responses": dg.AssetOut(
            key=RESPONSES,
            description="Counterfactual responses (Howard et al., seed 003): one row per (set, member, prompt, "
            "mitigation, seed) with member attributes, prompt label, model, version, raw text, status and the "
            "numeric parse (App. F). Text sets: the section 5.1 prefix on a text model, in blocks of sets (one "
            "step each); image sets (--cf-images) on the LVLM. Append-only, resumable.",
        ),
        "lexicon": dg.AssetOut(key=LEXICON, description="Competence lexicon (App. E.1) and stop list snapshots."),
    },
    config=same_config(CounterfactualConfig, *RESPONSE_OPS),
)
def counterfactual_responses():
    blocks, lexicon_rows = counterfactual_sets()
    return counterfactual_finish(blocks.map(counterfactual_block).collect(), lexicon_rows)


@_op(
    "counterfactual_toxicity",
    (
        TOXICITY,
        "Toxicity heads of every counterfactual response (offline: the Jigsaw BiLSTM of "
        "toxic-comment-classifier; toxic, severe_toxic, obscene, threat, insult, identity_hate). "
        "Stands in for the paper's Perspective API (absolute values not comparable).",
        [RESPONSES],
    ),
)
def counterfactual_toxicity(context: dg.AssetExecutionContext, config: CounterfactualConfig):
    skipped = _skipped(context, config, "counterfactual_toxicity", {TOXICITY: {"rows_scored": 0}})
    if skipped:
        yield from skipped
        return
    scorer = load_toxicity_scorer(config.toxicity_scorer)
    summary = score_toxicity(None, scorer, ScoreCache())
    yield dg.MaterializeResult(
        asset_key=TOXICITY,
        metadata={
            "scorer": scorer.name,
            "scorer_version": scorer.version,
            "rows_scored": summary.scored,
            "already_scored": summary.already_scored,
            "cache_hits": summary.cache_hits,
        },
    )


def pmi_candidates(audit_id=None, top: int = 50) -> dict:
    """The candidate words (s(w) > 1, freq >= min-freq) of each (audit, subset, group), by
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


@_op(
    "counterfactual_stereotype_filter",
    (
        FLAGS,
        "Stereotype filter (App. D.2, prompts verbatim, 3 answers per group, union, "
        "hallucinated words dropped) of each group's PMI word list, through the judge model "
        "(default: the embedded SmolLM2; the paper: GPT-4-turbo / GPT-4o).",
        [PMI],
    ),
)
def counterfactual_stereotype_filter(context: dg.AssetExecutionContext, config: CounterfactualConfig):
    skipped = _skipped(
        context, config, "counterfactual_stereotype_flags", {FLAGS: {"answers": 0}}, "judge backend none" if config.judge_backend == "none" else None
    )
    if skipped:
        yield from skipped
        return
    candidates = pmi_candidates()
    if config.judge_backend == "openai":
        judge = _text_backend(config, config.judge_model or "gpt-4o", "openai", config.judge_base_url)
    else:
        judge = _text_backend(config, config.judge_model or (config.model if config.backend == "transformers" else DEFAULT_MODEL), "transformers")
    summary = apply_stereotype_filter(candidates, judge, max_new_tokens=config.judge_max_new_tokens, max_error_share=config.max_error_share)
    yield dg.MaterializeResult(
        asset_key=FLAGS,
        metadata={
            "groups_with_candidates": summary.groups,
            "answers": summary.answers,
            "parse_status": dg.MetadataValue.json(dict(summary.statuses)),
            "judge_model": judge.model_id,
        },
    )


counterfactual_assets = [counterfactual_responses, counterfactual_toxicity, counterfactual_stereotype_filter]

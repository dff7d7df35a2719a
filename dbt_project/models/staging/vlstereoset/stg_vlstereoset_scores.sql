{#-
    VLStereoSet caption scores, one row per (audit_id, scorer_variant, item_id, condition,
    caption_kind), kept whatever its status; the latest scored_at wins on a retried key.
-#}

with

source as (
    select * from {{ source('landing', 'vlstereoset_scores') }}
),

latest as (
    {{ latest_per_key('source', ['audit_id', 'scorer_variant', 'dataset_id', 'item_id', 'condition', 'caption_kind'],
                      ['scored_at desc nulls last', 'status']) }}
),

renamed as (
    select
        audit_id,
        model_id,
        model_version,
        backend,
        scorer,
        scorer_variant,
        from_paper,
        score_kind,
        dataset_id,
        item_id,
        condition,
        caption_kind,
        caption_text,
        score,
        n_tokens,
        status,
        error,
        detail_json,
        scored_at
    from latest
)

select * from renamed

{#-
    One row per (audit, scorer variant, item, condition, caption): the caption's probability
    within its unit (int_vlstereoset_caption_probabilities: VLStereoSet §3.3's softmax, or the
    mcq share) with the item's attributes (stg_vlstereoset_items: category, target, y, image
    status; null for an item the landed items lack).
-#}

with

probabilities as (
    select * from {{ ref('int_vlstereoset_caption_probabilities') }}
),

items as (
    select * from {{ ref('stg_vlstereoset_items') }}
),

final as (
    select
        p.audit_id,
        p.model_id,
        p.model_version,
        p.backend,
        p.scorer,
        p.scorer_variant,
        p.from_paper,
        p.score_kind,
        p.dataset_id,
        i.is_synthetic,
        p.item_id,
        i.category,
        i.target,
        i.y,
        i.image_status,
        p.condition,
        p.caption_kind,
        p.caption_text,
        p.score,
        p.probability,
        p.n_tokens,
        p.status,
        p.error,
        p.scored_at
    from probabilities as p
    left join items as i
        on i.dataset_id = p.dataset_id and i.item_id = p.item_id
)

select * from final

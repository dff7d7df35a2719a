{#-
    One row per (audit, scorer variant, item, condition, caption) with the
    caption's probability within its (audit, variant, item, condition) (VLStereoSet §3.3:
    "we then use softmax to normalize ... into a 3-way probability distribution"):
    score_kind 'logit' -> softmax of the ok scores (max-subtracted), 'share' (mcq) -> the
    score itself, already a share of picks. Null for rows whose status is not ok, and for
    every row of a unit where any caption lacks an ok score (no partial distributions).
-#}

with

scores as (
    select * from {{ ref('stg_vlstereoset_scores') }}
),

items as (
    select * from {{ ref('stg_vlstereoset_items') }}
),

unit_stats as (
    select
        *,
        count(*) over unit as n_captions,
        count(score) over unit as n_scored_captions,
        max(score) over unit as max_score
    from scores
    window unit as (partition by audit_id, scorer_variant, dataset_id, item_id, condition)
),

normalised as (
    select
        *,
        case
            when n_scored_captions < n_captions or score is null then null
            when score_kind = 'share' then score
            else exp(score - max_score) / sum(exp(score - max_score)) over (
                partition by audit_id, scorer_variant, dataset_id, item_id, condition
            )
        end as probability
    from unit_stats
),

final as (
    select
        n.audit_id,
        n.model_id,
        n.model_version,
        n.backend,
        n.scorer,
        n.scorer_variant,
        n.from_paper,
        n.score_kind,
        n.dataset_id,
        i.is_synthetic,
        n.item_id,
        i.category,
        i.target,
        i.y,
        i.image_status,
        n.condition,
        n.caption_kind,
        n.caption_text,
        n.score,
        n.probability,
        n.n_tokens,
        n.status,
        n.error,
        n.scored_at
    from normalised as n
    left join items as i
        on i.dataset_id = n.dataset_id and i.item_id = n.item_id
)

select * from final

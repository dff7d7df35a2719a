{#-
    One row per (audit, scorer variant, item, condition, caption) with the caption's
    probability within its (audit, variant, item, condition) (VLStereoSet §3.3: "we then use
    softmax to normalize ... into a 3-way probability distribution"): score_kind 'logit' ->
    softmax of the ok scores (max-subtracted), 'share' (mcq) -> the score itself, already a
    share of picks. Null for rows whose status is not ok, and for every row of a unit where any
    caption lacks an ok score (no partial distributions). The caption scores mart
    (fct_vlstereoset_scores) and the selections (int_vlstereoset_selections) both read it.
-#}

with

scores as (
    select * from {{ ref('stg_vlstereoset_scores') }}
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
    -- the staging row (its detail JSON aside) with its probability
    select * exclude (detail_json, n_captions, n_scored_captions, max_score)
    from normalised
)

select * from final

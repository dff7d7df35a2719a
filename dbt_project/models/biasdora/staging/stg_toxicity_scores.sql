{#-
    Toxicity of each scored association sentence (docs/method.md#4-scoring), one row per
    (association, scorer, scorer_version); the latest scored_at wins on duplicates.
-#}

with

source as (
    select * from {{ source('landing', 'toxicity_scores') }}
),

renamed as (
    select
        {{ association_key() | join(', ') }},  -- the association key
        text,
        scorer,
        scorer_version,
        toxicity,
        is_toxic,
        label_scores_json,
        scored_at,
        coalesce(score_pool, 'fisher') as score_pool  -- which pool was scored
    from source
),

final as (
    {{ latest_per_key(
        'renamed',
        key=association_key() + ['scorer', 'scorer_version'],
        order_by=['scored_at desc nulls last', 'toxicity desc nulls last'],
    ) }}
)

select * from final

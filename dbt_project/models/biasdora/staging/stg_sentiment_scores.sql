{#-
    Sentiment of each scored association sentence (docs/method.md#4-scoring), one row per
    (association, scorer, scorer_version). The landing table is append-only, so a re-scored
    association can land twice; the latest scored_at wins.
-#}

with

source as (
    select * from {{ source('landing', 'sentiment_scores') }}
),

renamed as (
    select
        {{ association_key() | join(', ') }},  -- the association key
        text,
        scorer,
        scorer_version,
        sentiment_label,
        sentiment_score,
        scored_at,
        coalesce(score_pool, 'fisher') as score_pool  -- which pool was scored
    from source
),

final as (
    {{ latest_per_key(
        'renamed',
        key=association_key() + ['scorer', 'scorer_version'],
        order_by=['scored_at desc nulls last', 'sentiment_score desc nulls last'],
    ) }}
)

select * from final

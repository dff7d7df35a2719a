{#-
    Sentiment of each scored association sentence (METHOD.md section 4), one row per
    (association, scorer, scorer_version). The landing table is append-only, so a re-scored
    association can land twice; the latest scored_at wins.
-#}

with

source as (
    select * from {{ source('landing', 'sentiment_scores') }}
),

renamed as (
    select
        audit_id,
        model_id,
        model_version,
        modality,
        setting,
        descriptor,
        word,
        text,
        scorer,
        scorer_version,
        sentiment_label,
        sentiment_score,
        scored_at
    from source
),

deduplicated as (
    select *
    from renamed
    qualify row_number() over (
        partition by audit_id, model_id, model_version, modality, setting, descriptor, word, scorer, scorer_version
        order by scored_at desc nulls last, sentiment_score desc nulls last
    ) = 1
)

select * from deduplicated

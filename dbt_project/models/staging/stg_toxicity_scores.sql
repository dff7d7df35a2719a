{#-
    Toxicity of each scored association sentence (METHOD.md section 4), one row per
    (association, scorer, scorer_version); the latest scored_at wins on duplicates.
-#}

with

source as (
    select * from {{ source('landing', 'toxicity_scores') }}
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
        toxicity,
        is_toxic,
        label_scores_json,
        scored_at
    from source
),

deduplicated as (
    select *
    from renamed
    qualify row_number() over (
        partition by audit_id, model_id, model_version, modality, setting, descriptor, word, scorer, scorer_version
        order by scored_at desc nulls last, toxicity desc nulls last
    ) = 1
)

select * from deduplicated

{#-
    LLM-judge bias levels (docs/method.md#4-scoring), one row per
    (association, judge_backend, judge_model, judge_model_version, answer_mode, repeat), kept
    whatever
    its parse_status; the latest judged_at wins on duplicates.
-#}

with

source as (
    select * from {{ source('landing', 'judge_ratings') }}
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
        judge_backend,
        judge_model,
        judge_model_version,
        -- free (the paper's) or constrained; part of the key, so two runs of one
        -- judge version in different modes both count (rows landed without one: 'free')
        coalesce(answer_mode, 'free') as answer_mode,
        "repeat" as judge_repeat,
        seed,
        prompt,
        raw_output,
        rating,
        parse_status,
        p_rating_1,
        p_rating_2,
        p_rating_3,
        p_rating_4,
        p_rating_5,
        expected_rating,
        judged_at,
        coalesce(score_pool, 'fisher') as score_pool  -- which pool was scored
    from source
),

final as (
    select *
    from renamed
    qualify row_number() over (
        partition by audit_id, model_id, model_version, modality, setting, descriptor, word,
            judge_backend, judge_model, judge_model_version, answer_mode, judge_repeat
        order by (parse_status = 'error') asc, judged_at desc nulls last, raw_output desc nulls last
    ) = 1
)

select * from final

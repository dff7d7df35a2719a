{#-
    LLM-judge bias levels (docs/method.md#4-scoring), one row per
    (association, judge_backend, judge_model, judge_model_version, answer_mode, judge_run),
    kept whatever its parse_status; the latest judged_at wins on duplicates. The landing
    column `repeat` is the run (docs/glossary.md), named `judge_run` here as the other judge_*
    columns.
-#}

with

source as (
    select * from {{ source('landing', 'judge_ratings') }}
),

landed_rows as (
    select
        {{ association_key() | join(', ') }},  -- the association key
        judge_backend,
        judge_model,
        judge_model_version,
        -- free (the paper's) or constrained; part of the key, so two scorings by one
        -- judge version in different modes both count (rows landed without one: 'free')
        coalesce(answer_mode, 'free') as answer_mode,
        "repeat" as judge_run,  -- 1..K, as landed
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

renamed as (
    -- per (association, judge, run) a parsed rating before an error, then the latest
    {{ latest_per_key(
        'landed_rows',
        key=association_key() + ['judge_backend', 'judge_model', 'judge_model_version', 'answer_mode', 'judge_run'],
        order_by=["(parse_status = 'error') asc", 'judged_at desc nulls last', 'raw_output desc nulls last'],
    ) }}
)

select * from renamed

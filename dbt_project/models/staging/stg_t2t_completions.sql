{{ config(materialized='table') }}

{#-
    PUBLIC CONTRACT: one row per T2T completion key
    (audit_id, model_id, model_version, setting, descriptor, letter, run).
    The landing table is append-only, so a retried completion can land twice; the latest
    generated_at wins (ties broken deterministically).
-#}

with

source as (
    select * from {{ source('landing', 't2t_completions') }}
),

renamed as (
    select
        audit_id,
        model_id,
        model_version,
        backend,
        setting,
        descriptor,
        bias_dimension,
        letter,
        run,
        seed,
        prompt_style,
        prompt,
        raw_output,
        word,
        parse_status,
        generated_at
    from source
),

deduplicated as (
    {{ latest_per_key(
        'renamed',
        key=['audit_id', 'model_id', 'model_version', 'setting', 'descriptor', 'letter', 'run'],
        order_by=[
            'generated_at desc nulls last',
            'seed desc nulls last',
            'raw_output desc nulls last',
            'word desc nulls last',
            'parse_status desc nulls last',
        ],
    ) }}
)

select * from deduplicated

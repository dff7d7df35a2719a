{{ config(materialized='table') }}

{#-
    PUBLIC CONTRACT: one row per T2T completion key
    (audit_id, model_id, model_version, setting, descriptor, letter, run).
    The landing table is append-only, so a retried completion can land twice; a row that is
    not an `error` wins over an error row, then the latest generated_at (ties broken
    deterministically). `attempts` counts the key's landed rows and `last_error` keeps the
    latest failed call's message (issue 17: failed calls are retried by the next run).
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

with_history as (
    select
        *,
        count(*) over key_rows as attempts,
        arg_max(raw_output, generated_at) filter (where parse_status = 'error') over key_rows as last_error
    from renamed
    window key_rows as (partition by audit_id, model_id, model_version, setting, descriptor, letter, run)
),

deduplicated as (
    {{ latest_per_key(
        'with_history',
        key=['audit_id', 'model_id', 'model_version', 'setting', 'descriptor', 'letter', 'run'],
        order_by=[
            "(parse_status = 'error') asc",
            'generated_at desc nulls last',
            'seed desc nulls last',
            'raw_output desc nulls last',
            'word desc nulls last',
            'parse_status desc nulls last',
        ],
    ) }}
)

select * from deduplicated

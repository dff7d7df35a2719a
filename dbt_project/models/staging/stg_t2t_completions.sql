{{ config(materialized='table') }}

{#-
    PUBLIC CONTRACT: one row per T2T completion key
    (audit_id, model_id, model_version, setting, descriptor, descriptor_row, letter, run):
    a probe unit is a row of the paper's lists (issue 11), descriptor_row numbers the rows
    of one descriptor in a setting (rows landed before it existed are row 1).
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
        coalesce(descriptor_row, 1) as descriptor_row,
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
        key=['audit_id', 'model_id', 'model_version', 'setting', 'descriptor', 'descriptor_row', 'letter', 'run'],
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

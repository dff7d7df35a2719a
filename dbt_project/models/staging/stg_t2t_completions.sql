{%- set key = ['audit_id', 'model_id', 'model_version', 'setting', 'descriptor', 'letter', 'run'] %}
{{ config(
    materialized='incremental',
    incremental_strategy='delete+insert',
    unique_key=key,
    on_schema_change='append_new_columns',
    pre_hook=["{{ restage_if_landing_shards_gone('t2t_completions') }}", "{{ set_new_landing_shards('t2t_completions') }}"],
) }}

{#-
    PUBLIC CONTRACT: one row per T2T completion key
    (audit_id, model_id, model_version, setting, descriptor, letter, run).
    The landing table is append-only, so a retried completion can land twice; the latest
    generated_at wins (ties broken deterministically).
-#}

with

source as (
    select * from {{ new_landing_shards('t2t_completions', source('landing', 't2t_completions')) }}
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
        generated_at,
        _landing_shard
    from source
),

candidates as (
    select * from renamed
    {%- if landing_shards_staged('t2t_completions') %}
    union all by name
    select staged.* from {{ this }} as staged semi join renamed using ({{ key | join(', ') }})
    {%- endif %}
),

deduplicated as (
    {{ latest_per_key(
        'candidates',
        key=key,
        order_by=[
            'generated_at desc nulls last',
            'seed desc nulls last',
            'raw_output desc nulls last',
            'word desc nulls last',
            'parse_status desc nulls last',
            '_landing_shard desc',
        ],
    ) }}
)

select * from deduplicated

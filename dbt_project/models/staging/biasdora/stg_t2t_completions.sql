{%- set key = ['audit_id', 'model_id', 'model_version', 'setting', 'descriptor', 'descriptor_row', 'letter', 'run'] %}
{#- Incremental, not the staging view: reads only the landing shards not yet staged (macros/landing_shards.sql). -#}
{{ config_staged_from_landing('t2t_completions', key) }}

{#-
    PUBLIC CONTRACT: one row per T2T completion key
    (audit_id, model_id, model_version, setting, descriptor, descriptor_row, letter, run):
    a probe unit is a row of the paper's lists, descriptor_row numbers the rows
    of one descriptor in a setting (rows landed before it existed are row 1).
    The landing table is append-only, so a retried completion can land twice; the latest
    generated_at wins, then the latest re-parse of that call's raw output (`dora reparse` lands
    it with the call's generated_at and a reparsed_at), ties broken deterministically.
-#}

with

source as (
    select * from {{ new_landing_shards('t2t_completions', source('landing', 't2t_completions')) }}
),

landed_rows as (
    select
        {{ probe_row_columns() }},
        letter,
        run,
        seed,
        prompt_style,
        prompt,
        raw_output,
        word,
        parse_status,
        generated_at,
        -- null for rows landed before the probe landed them (fct_associations_to_score
        -- derives those from `prompt`)
        subject,
        prefix,
        -- the parser that read word / parse_status, and when `dora reparse` re-read the row
        -- (null: the model call's own row; both null for rows landed before they existed)
        parse_version,
        reparsed_at,
        _landing_shard
    from source
),

candidates as (
    -- new rows count one attempt each; a key already staged brings its attempts and last error
    -- a re-parsed row is not a model call: it adds no attempt
    select *, false as _is_staged, case when reparsed_at is null then 1 else 0 end as _prior_attempts,
           null::varchar as _prior_error
    from landed_rows
    {%- if landing_shards_staged('t2t_completions') %}
    union all by name
    select
        staged.* exclude (attempts, last_error),
        true as _is_staged,
        staged.attempts as _prior_attempts,
        staged.last_error as _prior_error
    from {{ this }} as staged semi join landed_rows using ({{ key | join(', ') }})
    {%- endif %}
),

with_history as (
    -- every failed call lands an `error` row that the next run retries; keep how
    -- many rows landed for the key and the latest failure message
    select
        * exclude (_is_staged, _prior_attempts, _prior_error),
        sum(_prior_attempts) over key_rows as attempts,
        coalesce(
            arg_max(raw_output, generated_at) filter (where parse_status = 'error' and not _is_staged) over key_rows,
            max(_prior_error) over key_rows
        ) as last_error
    from candidates
    window key_rows as (partition by {{ key | join(', ') }})
),

renamed as (
    {{ latest_per_key(
        'with_history',
        key=key,
        order_by=[
            "(parse_status = 'error') asc",
            'generated_at desc nulls last',
            'reparsed_at desc nulls last',
            'seed desc nulls last',
            'raw_output desc nulls last',
            'word desc nulls last',
            'parse_status desc nulls last',
            '_landing_shard desc',
        ],
    ) }}
)

{{ select_with_build_stamp('renamed', landing_shards_staged('t2t_completions') and has_columns(this, ['_dbt_built_at'])) }}

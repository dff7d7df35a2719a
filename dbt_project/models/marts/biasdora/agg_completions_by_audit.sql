{#-
    T2T completions per audit: how many completion keys landed (latest retry of each, from
    stg_t2t_completions) and the share that parsed to a word (parse_status = 'ok'). The counts
    `dim_audits` reports and the collapse checks compare (orchestration/defs/audits/checks.py).

    Incremental per audit (macros/incremental_audits.sql), like fct_associations: only audits
    with completions landed since the last build are recounted, so the counts of an audit whose
    completion shards were archived stay.
-#}

{%- set watermark_columns = ['inputs_landed_at'] %}
{%- set rebuild_by_audit = is_incremental() and has_columns(this, model.columns.keys() | list) %}

{#- Incremental, not a mart table: rebuilds only audits with new inputs, keeps archived ones (macros/incremental_audits.sql). -#}
{{ config_incremental_by_audit() }}

with

completions as (
    select * from {{ ref('stg_t2t_completions') }}
),

counted as (
    select
        audit_id,
        count(*) as completions,
        count(*) filter (where parse_status = 'ok') as completions_parsed,
        avg(case when parse_status = 'ok' then 1.0 else 0.0 end) as parse_rate,
        max(generated_at) as inputs_landed_at
    from completions
    group by audit_id
),
{%- if rebuild_by_audit %}

audits_to_rebuild as (
    {{ audits_to_rebuild('counted', watermark_columns) }}
),
{%- endif %}

final as (
    select *
    from counted
    {{ only_audits_to_rebuild(rebuild_by_audit) }}
)

select * from final

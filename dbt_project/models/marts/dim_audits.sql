{#- One row per audit, summarising its lifecycle events (latest event wins). -#}

with

audit_events as (
    select * from {{ ref('stg_audits') }}
),

final as (
    select
        audit_id,
        arg_max(model_id, event_at) as model_id,
        arg_max(model_version, event_at) as model_version,
        arg_max(modality, event_at) as modality,
        arg_max(config_hash, event_at) as config_hash,
        arg_max(code_version, event_at) as code_version,
        min(event_at) filter (where status = 'started') as started_at,
        max(event_at) filter (where status in ('finished', 'failed')) as finished_at,
        arg_max(status, event_at) as status,
        arg_max(rows_generated, event_at) filter (where rows_generated is not null) as rows_generated
    from audit_events
    group by audit_id
)

select * from final

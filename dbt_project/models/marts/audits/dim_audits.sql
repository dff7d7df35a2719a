{#-
    One row per audit (one run of all probes against one model version): its lifecycle from
    the append-only events (latest event wins), its registry target, its probe family, its
    probe configuration (config hash) and the previous finished audit of the same target,
    family and modality (the drift checks, the change tests): an audit of another family is
    not a predecessor, its figures measure something else. Only what every audit has: a
    family's own figures of its audits are in its marts (BiasDora's: agg_biasdora_audits).
-#}

with

audit_events as (
    select * from {{ ref('stg_audits') }}
),

lifecycle as (
    select
        audit_id,
        -- ad-hoc audits carry no registry target: they are grouped by model id
        coalesce(
            arg_max(target, event_at) filter (where target is not null),
            arg_max(model_id, event_at)
        ) as target,
        arg_max(model_id, event_at) as model_id,
        arg_max(model_version, event_at) as model_version,
        arg_max(modality, event_at) as modality,
        arg_max(family, event_at) as family,
        arg_max(config_hash, event_at) as config_hash,
        arg_max(code_version, event_at) as code_version,
        coalesce(min(event_at) filter (where status = 'started'), min(event_at)) as started_at,
        max(event_at) filter (where status in ('finished', 'failed')) as finished_at,
        arg_max(status, event_at) as status,
        arg_max(rows_generated, event_at) filter (where rows_generated is not null) as rows_generated
    from audit_events
    group by audit_id
),

finished_sequence as (
    -- the finished audits of each target in start order (audit_seq); the previous one of the
    -- same family and modality is the audit each one is compared with
    select
        audit_id,
        row_number() over target_audits as audit_seq,
        lag(audit_id) over kind_audits as previous_audit_id
    from lifecycle
    where status = 'finished'
    window
        target_audits as (partition by target order by started_at, audit_id),
        kind_audits as (partition by target, family, modality order by started_at, audit_id)
),

final as (
    select
        lifecycle.audit_id,
        lifecycle.target,
        lifecycle.model_id,
        lifecycle.model_version,
        lifecycle.modality,
        lifecycle.family,
        lifecycle.config_hash,
        lifecycle.code_version,
        lifecycle.started_at,
        lifecycle.finished_at,
        lifecycle.status,
        lifecycle.rows_generated,
        finished_sequence.audit_seq,
        finished_sequence.previous_audit_id
    from lifecycle
    left join finished_sequence on lifecycle.audit_id = finished_sequence.audit_id
)

select * from final

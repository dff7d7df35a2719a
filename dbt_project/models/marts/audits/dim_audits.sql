{#-
    One row per audit (one run of all probes against one model version): its lifecycle from
    the append-only events (latest event wins), its registry target, its probe family, the
    counts the collapse checks compare (parse rate, significant associations), and the
    previous finished audit of the same target, family and modality
    (orchestration/defs/audits/checks.py, fct_association_changes): an audit of another
    family is not a predecessor, its counts measure something else.
-#}

with

audit_events as (
    select * from {{ ref('stg_audits') }}
),

completion_counts as (
    -- incremental per audit: counts stay when an audit's completion shards are archived
    select audit_id, completions, parse_rate from {{ ref('agg_completions_by_audit') }}
),

associations as (
    select * from {{ ref('fct_associations') }}
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

association_counts as (
    select
        audit_id,
        count(*) as associations,
        count(*) filter (where is_significant) as significant_associations
    from associations
    group by audit_id
),

counted as (
    select
        lifecycle.*,
        coalesce(completion_counts.completions, 0) as completions,
        completion_counts.parse_rate,
        coalesce(association_counts.associations, 0) as associations,
        coalesce(association_counts.significant_associations, 0) as significant_associations
    from lifecycle
    left join completion_counts on lifecycle.audit_id = completion_counts.audit_id
    left join association_counts on lifecycle.audit_id = association_counts.audit_id
),

finished_sequence as (
    -- the finished audits of each target in start order (audit_seq); the previous one of the
    -- same family and modality is the audit each one is compared with
    select
        audit_id,
        row_number() over target_audits as audit_seq,
        lag(audit_id) over kind_audits as previous_audit_id,
        lag(parse_rate) over kind_audits as previous_parse_rate,
        lag(significant_associations) over kind_audits as previous_significant_associations
    from counted
    where status = 'finished'
    window
        target_audits as (partition by target order by started_at, audit_id),
        kind_audits as (partition by target, family, modality order by started_at, audit_id)
),

final as (
    select
        counted.audit_id,
        counted.target,
        counted.model_id,
        counted.model_version,
        counted.modality,
        counted.family,
        counted.config_hash,
        counted.code_version,
        counted.started_at,
        counted.finished_at,
        counted.status,
        counted.rows_generated,
        counted.completions,
        counted.parse_rate,
        counted.associations,
        counted.significant_associations,
        finished_sequence.audit_seq,
        finished_sequence.previous_audit_id,
        finished_sequence.previous_parse_rate,
        finished_sequence.previous_significant_associations
    from counted
    left join finished_sequence on counted.audit_id = finished_sequence.audit_id
)

select * from final

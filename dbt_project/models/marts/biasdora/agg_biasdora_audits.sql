{#-
    BiasDora's figures of each of its audits, one row per audit of the family: the T2T
    completions and their parse rate (agg_completions_by_audit), the associations and the
    significant ones (fct_associations), beside the audit's place in its target's sequence
    (dim_audits). The shared dim_audits holds only what every audit has; this mart is where the
    version pages, `dora diff`'s notes and the dry run's estimate read BiasDora's counts.
-#}

with

audits as (
    select audit_id, target, model_id, model_version, modality, status, started_at, audit_seq, previous_audit_id
    from {{ ref('dim_audits') }}
    where family = 'biasdora'
),

completion_counts as (
    -- incremental per audit: counts stay when an audit's completion shards are archived
    select audit_id, completions, completions_parsed, parse_rate from {{ ref('agg_completions_by_audit') }}
),

associations as (
    select * from {{ ref('fct_associations') }}
),

association_counts as (
    select
        audit_id,
        count(*) as associations,
        count(*) filter (where is_significant) as significant_associations
    from associations
    group by audit_id
),

final as (
    select
        audits.audit_id,
        audits.target,
        audits.model_id,
        audits.model_version,
        audits.modality,
        audits.status,
        audits.started_at,
        audits.audit_seq,
        audits.previous_audit_id,
        coalesce(completion_counts.completions, 0) as completions,
        coalesce(completion_counts.completions_parsed, 0) as completions_parsed,
        completion_counts.parse_rate,
        coalesce(association_counts.associations, 0) as associations,
        coalesce(association_counts.significant_associations, 0) as significant_associations
    from audits
    left join completion_counts on audits.audit_id = completion_counts.audit_id
    left join association_counts on audits.audit_id = association_counts.audit_id
)

select * from final

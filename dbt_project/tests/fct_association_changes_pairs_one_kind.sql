{#-
    fct_association_changes compares two audits of one kind only: the same target, probe
    family and modality (dim_audits). A pair across families (a BiasDora T2T audit against a
    VLStereoSet audit of the same model) would list every association as gone or new.
    Returns the offending pairs. It reads two models: Dagster runs it as a check of
    fct_association_changes (meta dagster.ref), in the score build after that model, not in
    the first build where only dim_audits exists.
-#}

{{ config(tags=['scores'], meta={'dagster': {'ref': {'name': 'fct_association_changes'}}}) }}

with

changes as (
    select distinct from_audit_id, to_audit_id from {{ ref('fct_association_changes') }}
),

audits as (
    select audit_id, target, family, modality from {{ ref('dim_audits') }}
),

final as (
    select
        changes.from_audit_id,
        changes.to_audit_id,
        earlier.family as from_family,
        later.family as to_family,
        earlier.modality as from_modality,
        later.modality as to_modality
    from changes
    inner join audits as earlier on earlier.audit_id = changes.from_audit_id
    inner join audits as later on later.audit_id = changes.to_audit_id
    where earlier.family is distinct from later.family
       or earlier.modality is distinct from later.modality
       or earlier.target is distinct from later.target
)

select * from final

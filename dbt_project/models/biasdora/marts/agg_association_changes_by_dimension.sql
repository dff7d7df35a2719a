{#-
    Per pair of audits of a target and per (modality, bias dimension), how many
    listed associations (significant in at least one of the two audits) changed significantly
    (change_q < 0.05, fct_association_changes) and in which direction. Settings pool: each
    association was tested within its own setting's BH family, the counts add them up.
-#}

{{ config(tags=['scores']) }}

with

changes as (
    select * from {{ ref('fct_association_changes') }}
),

final as (
    select
        target,
        from_audit_id,
        to_audit_id,
        any_value(from_model_version) as from_model_version,
        any_value(to_model_version) as to_model_version,
        bool_and(is_previous) as is_previous,
        modality,
        coalesce(bias_dimension, '(none)') as bias_dimension,
        count(*) as associations_compared,
        count(*) filter (where is_significant_change) as significant_changes,
        count(*) filter (where change_type = 'new') as new_associations,
        count(*) filter (where change_type = 'strengthened') as strengthened,
        count(*) filter (where change_type = 'weakened') as weakened,
        count(*) filter (where change_type = 'gone') as gone_associations,
        count(*) filter (where change_type = 'unchanged') as unchanged,
        count(*) filter (where change_type in ('new', 'strengthened'))
            - count(*) filter (where change_type in ('gone', 'weakened')) as net_change,
        case
            when count(*) filter (where is_significant_change) = 0 then 'no detectable change'
            when count(*) filter (where change_type in ('gone', 'weakened')) = 0 then 'stronger'
            when count(*) filter (where change_type in ('new', 'strengthened')) = 0 then 'weaker'
            else 'mixed'
        end as direction,
        min(change_q) as min_change_q
    from changes
    group by target, from_audit_id, to_audit_id, modality, coalesce(bias_dimension, '(none)')
)

select * from final

{#-
    Per pair of audits of a target and per (modality, bias dimension), how many
    listed associations (significant in at least one of the two audits) changed significantly
    (change_q < 0.05, fct_association_changes) and in which direction. Settings pool: each
    association was tested within its own setting's BH family, the counts add them up.
    An association counts under EVERY bias dimension of its descriptor, and every dimension
    audited in either audit of the pair (fct_association_dimensions) has its row, with 0
    associations compared where none of it is listed.
-#}

{{ config(tags=['scores']) }}

{%- set pair_columns = ['target', 'from_audit_id', 'to_audit_id', 'modality'] %}

with

changes as (
    -- each listed association under EACH bias dimension of its descriptor
    select * exclude (bias_dimensions), unnest(bias_dimensions) as bias_dimension
    from {{ ref('fct_association_changes') }}
),

pairs as (
    select
        {{ pair_columns | join(', ') }},
        any_value(from_model_version) as from_model_version,
        any_value(to_model_version) as to_model_version,
        bool_and(is_previous) as is_previous
    from {{ ref('fct_association_changes') }}
    group by all
),

dimensions as (
    -- every dimension audited (in the same modality) by either audit of the pair
    select distinct pairs.*, audited.bias_dimension
    from pairs
    inner join {{ ref('fct_association_dimensions') }} as audited
        on  audited.modality = pairs.modality
        and audited.audit_id in (pairs.from_audit_id, pairs.to_audit_id)
),

final as (
    select
        dimensions.target,
        dimensions.from_audit_id,
        dimensions.to_audit_id,
        dimensions.from_model_version,
        dimensions.to_model_version,
        dimensions.is_previous,
        dimensions.modality,
        coalesce(dimensions.bias_dimension, '(none)') as bias_dimension,
        count(changes.word) as associations_compared,
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
    from dimensions
    left join changes
        on {{ join_on('dimensions', 'changes', pair_columns) }}
        and dimensions.bias_dimension is not distinct from changes.bias_dimension
    group by all
)

select * from final

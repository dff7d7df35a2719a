{#- A view, not a mart table: a fan-out of fct_associations by dimension, it would copy
    every association row once per dimension of its descriptor for no new column of work. -#}
{{ config(materialized='view') }}

{#-
    PUBLIC: the association -> bias dimension bridge (docs/method.md#1-descriptors), one row
    per (audit_id, modality, setting, descriptor, word, bias_dimension): an association
    belongs to every dimension its descriptor is listed under (fct_associations.bias_dimensions,
    from int_descriptor_dimensions). THE table for per-dimension questions: `where
    bias_dimension = 'race-color' and is_significant` counts every association of the
    dimension, also those of descriptors listed under another dimension too.
-#}

with

associations as (
    select * from {{ ref('fct_associations') }}
),

final as (
    select
        {{ association_key() | join(', ') }},
        unnest(bias_dimensions) as bias_dimension,
        is_significant,
        is_paper_significant
    from associations
)

select * from final

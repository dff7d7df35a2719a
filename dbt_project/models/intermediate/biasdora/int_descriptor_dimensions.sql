{#-
    THE BRIDGE descriptor -> bias dimension (docs/method.md#1-descriptors): one row per
    (audit, modality, setting, descriptor, bias_dimension) for every document of
    int_document_words. A descriptor belongs to EVERY dimension it is listed under:
    - T2T: every dimension of its rows in the same setting's list (t2t_setting1..5.csv), so a
      quick audit that probed only the age row of "old person" still files it under
      disability too;
    - T2I / I2T (descriptions of images): every dimension of its rows in the T2I lists plus
      bias_target_mapping.json (gender included);
    - always also the dimensions of the audit's own probe rows (custom / extracted
      descriptors have no list row).
-#}

with

documents as (
    -- descriptor = the target (a plural image target is "old people"); descriptor_key = the
    -- list's key it comes from
    select distinct audit_id, modality, setting, descriptor, coalesce(descriptor_key, descriptor) as descriptor_key,
           bias_dimension
    from {{ ref('int_document_words') }}
),

list_rows as (
    select distinct list_modality, setting, descriptor, bias_dimension
    from {{ ref('stg_descriptor_rows') }}
),

from_lists as (
    select documents.audit_id, documents.modality, documents.setting, documents.descriptor,
           list_rows.bias_dimension
    from documents
    inner join list_rows
        on  list_rows.descriptor = documents.descriptor_key
        and (
            (documents.modality = 't2t' and list_rows.list_modality = 't2t' and list_rows.setting = documents.setting)
            or (documents.modality in ('t2i', 'i2t') and list_rows.list_modality = 't2i')
        )
),

final as (
    select audit_id, modality, setting, descriptor, bias_dimension from from_lists
    union
    select audit_id, modality, setting, descriptor, bias_dimension from documents
    where bias_dimension is not null
)

select * from final

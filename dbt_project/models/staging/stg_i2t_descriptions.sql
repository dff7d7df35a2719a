{{ config(materialized='table') }}

{#-
    PUBLIC CONTRACT: one row per description key
    (audit_id, image_setting, descriptor, descriptor_row, image_index, setting).
    Append-only landing: a failed description is retried and lands again; the latest
    generated_at wins. description_id identifies the winning row, whose words
    (stg_description_words) are the ones that count.
-#}

with

source as (
    select * from {{ source('landing', 'i2t_descriptions') }}
),

renamed as (
    select
        audit_id,
        description_id,
        model_id,
        model_version,
        backend,
        image_audit_id,
        t2i_model_id,
        t2i_model_version,
        image_setting,
        descriptor,
        bias_dimension,
        coalesce(descriptor_row, 1) as descriptor_row,  -- issue 11: the image's T2I row
        image_index,
        image_sha256,
        setting,
        description_kind,
        seed,
        prompt,
        raw_output,
        status,
        error,
        generated_at
    from source
),

deduplicated as (
    select *
    from renamed
    qualify row_number() over (
        partition by audit_id, image_setting, descriptor, descriptor_row, image_index, setting
        order by
            generated_at desc nulls last,
            (status <> 'error') desc,
            description_id desc
    ) = 1
)

select * from deduplicated

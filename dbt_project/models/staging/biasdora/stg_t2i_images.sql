{#- A table, not the staging view: the dedup window over every landed image runs once per build,
    not once per query of the I2T probe and the marts that read it. -#}
{{ config(materialized='table') }}

{#-
    PUBLIC CONTRACT: one row per T2I image key
    (audit_id, model_id, model_version, setting, descriptor, image_index).
    The landing table is append-only: a failed image is retried and lands again, so the
    latest generated_at wins (ties broken deterministically).
-#}

with

source as (
    select * from {{ source('landing', 't2i_images') }}
),

landed_rows as (
    select
        {{ probe_row_columns() }},
        image_index,
        seed,
        prompt,
        revised_prompt,
        style,
        generation_params,
        image_path,
        sha256,
        width,
        height,
        status,
        error,
        generated_at
    from source
),

renamed as (
    {{ latest_per_key(
        'landed_rows',
        key=['audit_id', 'model_id', 'model_version', 'setting', 'descriptor', 'descriptor_row', 'image_index'],
        order_by=['generated_at desc nulls last', "(status = 'ok') desc", 'sha256 desc nulls last'],
    ) }}
)

select * from renamed

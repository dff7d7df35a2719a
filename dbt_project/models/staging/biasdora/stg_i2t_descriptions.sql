{%- set key = ['audit_id', 'image_setting', 'descriptor', 'image_index', 'setting'] %}
{#- Incremental, not the staging view: reads only the landing shards not yet staged (macros/landing_shards.sql). -#}
{{ config_staged_from_landing('i2t_descriptions', key) }}

{#-
    PUBLIC CONTRACT: one row per description key
    (audit_id, image_setting, descriptor, descriptor_row, image_index, setting).
    Append-only landing: a failed description is retried and lands again; the latest
    generated_at wins. description_id identifies the winning row, whose words
    (stg_description_words) are the ones that count.
    Incremental on the landing shards (macros/landing_shards.sql): a build reads only
    the shards not staged yet; the staged rows of a key that lands again compete with it.
-#}

with

source as (
    select * from {{ new_landing_shards('i2t_descriptions', source('landing', 'i2t_descriptions')) }}
),

landed_rows as (
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
        coalesce(descriptor_row, 1) as descriptor_row,  -- the image's T2I row
        image_index,
        image_sha256,
        setting,
        description_kind,
        seed,
        prompt,
        raw_output,
        status,
        error,
        generated_at,
        _landing_shard
    from source
),

candidates as (
    select * from landed_rows
    {%- if landing_shards_staged('i2t_descriptions') %}
    union all by name
    select staged.* from {{ this }} as staged semi join landed_rows using ({{ key | join(', ') }})
    {%- endif %}
),

renamed as (
    select *
    from candidates
    qualify row_number() over (
        partition by audit_id, image_setting, descriptor, descriptor_row, image_index, setting
        order by
            generated_at desc nulls last,
            (status <> 'error') desc,
            description_id desc,
            _landing_shard desc
    ) = 1
)

{{ select_with_build_stamp('renamed', landing_shards_staged('i2t_descriptions') and has_columns(this, ['_dbt_built_at'])) }}

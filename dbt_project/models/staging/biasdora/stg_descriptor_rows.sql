{#-
    Every row of the paper's T2T and T2I lists with each bias dimension it belongs to
    (ingestion/biasdora/templates.py descriptor_rows_table; docs/method.md#1-descriptors): T2T one
    row per CSV row, T2I one row per (CSV row, dimension), the extra T2I dimensions coming
    from bias_target_mapping.json (which assigns e.g. woman, mother to gender).
-#}

with

source as (
    select * from {{ source('landing', 'descriptor_rows') }}
),

renamed as (
    select distinct
        list_modality,
        setting,
        row_number,
        descriptor,
        descriptor_row,
        bias_dimension,
        membership_source,
        phrase
    from source
)

select * from renamed

{#- The toy's landed rows, one per (audit, item): a resumed audit may land an item twice, the latest landing is kept. -#}
with source as (
    select * from {{ source('landing', 'toy_rows') }}
),

renamed as (
    select
        audit_id,
        model_id,
        model_version,
        item,
        word,
        status,
        landed_at
    from source
    qualify row_number() over (partition by audit_id, item order by landed_at desc, word) = 1
)

select * from renamed

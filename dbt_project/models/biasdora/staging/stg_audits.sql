with

source as (
    select * from {{ source('landing', 'audits') }}
),

renamed as (
    select
        audit_id,
        model_id,
        model_version,
        modality,
        config_json,
        config_hash,
        code_version,
        status,
        rows_generated,
        event_at,
        target
    from source
)

select * from renamed

{#-
    The audit log of every family (landing/audits, models_inference/audit_log.py), one row per
    event, with the probe family that ran it.
-#}

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
        target,
        -- an event landed before the audit log carried `family` is named from its modality
        coalesce(family, {{ audit_family('modality') }}) as family
    from source
)

select * from renamed

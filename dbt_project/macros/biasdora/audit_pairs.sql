{#- BiasDora's audit pairs: the (earlier, later) audits its change marts compare (`dora diff`). -#}


{% macro biasdora_audit_pairs() -%}
    {#-
        SELECT of every (earlier, later) pair of finished audits of the same target, family and
        modality (dim_audits; a T2T audit is not compared with a VLStereoSet one). Columns:
        target, from_audit_id, to_audit_id, from_model_version, to_model_version, is_previous
        (the later audit directly follows the earlier one among the audits of its kind).
    -#}
    with kind_audits as (
        select
            *,
            row_number() over (partition by target, family, modality order by audit_seq) as kind_seq
        from {{ ref('dim_audits') }}
        where status = 'finished' and audit_seq is not null
    )
    select
        later.target,
        earlier.audit_id as from_audit_id,
        later.audit_id as to_audit_id,
        earlier.model_version as from_model_version,
        later.model_version as to_model_version,
        later.kind_seq - earlier.kind_seq = 1 as is_previous
    from kind_audits as later
    inner join kind_audits as earlier
        on  earlier.target = later.target
        and earlier.family = later.family
        and earlier.modality = later.modality
        and earlier.kind_seq < later.kind_seq
{%- endmacro %}

{% macro audit_family(modality) -%}
    {#-
        The probe family of an audit event landed before the audit log had a `family` column
        (stg_audits: coalesce(family, audit_family(modality))), from its `modality`: BiasDora's
        t2t / t2i / i2t, ModSCAN's modscan_text / modscan_language / modscan_vision, and
        counterfactual / vlstereoset, which name their family. Newer events name their family
        (AuditInfo.family, models_inference/audit_log.py), so a new family needs no line here. Audits are compared only within one family and modality:
        a BiasDora T2T audit and a VLStereoSet audit of the same model measure different things.
    -#}
    case
        when {{ modality }} in ('t2t', 't2i', 'i2t') then 'biasdora'
        when {{ modality }} like 'modscan%' then 'modscan'
        else {{ modality }}
    end
{%- endmacro %}

{% macro audit_family(modality) -%}
    {#-
        The probe family of an audit from the `modality` of its events (the AuditInfo each
        probe lands, models_inference/resumable.py): BiasDora's t2t / t2i / i2t, ModSCAN's
        modscan_text / modscan_language / modscan_vision, and counterfactual / vlstereoset,
        which name their family. Audits are compared only within one family and modality:
        a BiasDora T2T audit and a VLStereoSet audit of the same model measure different things.
    -#}
    case
        when {{ modality }} in ('t2t', 't2i', 'i2t') then 'biasdora'
        when {{ modality }} like 'modscan%' then 'modscan'
        else {{ modality }}
    end
{%- endmacro %}

{#- The shape every family's drift mart shares (analytics/drift.py reads them; docs/operations.md#drift-checks). -#}


{% macro drift_pairs(family) -%}
    {#-
        SELECT of every finished audit of the probe family `family` (a name the family's own
        model passes) that has a previous finished audit of the same target, family and modality
        (dim_audits.previous_audit_id): target, family, modality, audit_id, previous_audit_id,
        model_version, previous_model_version. A drift check compares each such pair on the
        probe units both audits have.
    -#}
    select
        latest.target,
        latest.family,
        latest.modality,
        latest.audit_id,
        latest.previous_audit_id,
        latest.model_version,
        previous.model_version as previous_model_version
    from {{ ref('dim_audits') }} as latest
    inner join {{ ref('dim_audits') }} as previous on previous.audit_id = latest.previous_audit_id
    where latest.family = '{{ family }}' and latest.status = 'finished'
{%- endmacro %}


{% macro drift_final(pairs, checks) -%}
    {#-
        The drift mart's rows: one per (audit, check) of `pairs` (drift_pairs) whose check CTE
        `checks` (from_audit_id, to_audit_id, check_name, value_before, value_after,
        units_compared, change_p) has a row for the pair, with the significance level the
        change is judged at. A pair without a row for a check has no common unit for it: the
        check reports it as not comparable.
    -#}
    select
        {{ pairs }}.target,
        {{ pairs }}.family,
        {{ pairs }}.modality,
        {{ pairs }}.audit_id,
        {{ pairs }}.previous_audit_id,
        {{ pairs }}.model_version,
        {{ pairs }}.previous_model_version,
        {{ checks }}.check_name,
        cast({{ checks }}.value_before as double) as value_before,
        cast({{ checks }}.value_after as double) as value_after,
        cast({{ checks }}.units_compared as bigint) as units_compared,
        cast({{ checks }}.change_p as double) as change_p,
        cast({{ var('significance_level') }} as double) as significance_level
    from {{ pairs }}
    inner join {{ checks }}
        on {{ checks }}.from_audit_id = {{ pairs }}.previous_audit_id and {{ checks }}.to_audit_id = {{ pairs }}.audit_id
    where {{ checks }}.units_compared > 0
{%- endmacro %}

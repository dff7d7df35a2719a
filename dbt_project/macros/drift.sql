{#- The shape every family's drift mart shares (analytics/drift.py reads them; docs/operations.md#drift-checks). -#}


{% macro drift_final(family, checks) -%}
    {#-
        The drift mart's rows: one per (audit pair, check) of the check CTE `checks`
        (from_audit_id, to_audit_id, check_name, value_before, value_after, units_compared,
        change_p) with a common unit, named by the family `family` (a name the family's own
        model passes), with the significance level a change is judged at. analytics/drift.py
        judges the pair (previous_audit_id, audit_id) that dim_audits gives each target's latest
        audit; a pair without a row for a check has no common unit for it: not comparable.
        Reading no audit log keeps a family's drift mart (and its checks) in its own group.
    -#}
    select
        '{{ family }}' as family,
        to_audit_id as audit_id,
        from_audit_id as previous_audit_id,
        check_name,
        cast(value_before as double) as value_before,
        cast(value_after as double) as value_after,
        cast(units_compared as bigint) as units_compared,
        cast(change_p as double) as change_p,
        cast({{ var('significance_level') }} as double) as significance_level
    from {{ checks }}
    where units_compared > 0
{%- endmacro %}

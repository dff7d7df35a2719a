{#- ModSCAN definitions shared by the modscan marts (docs/families/modscan.md). -#}

{% macro modscan_social_groups() -%}
    {#-
        The social groups of Eq. (1) (seed 000 §2), one row per (attribute, social_group), with
        n_groups, the attribute's number of groups: L_gender = {male, female},
        L_race = {White, Black, Asian, Indian}. Stated once: the selection probabilities
        and the Ensemble both count over these groups.
    -#}
    select attribute, social_group, count(*) over (partition by attribute) as n_groups
    from (values
        ('gender', 'male'), ('gender', 'female'),
        ('race', 'White'), ('race', 'Black'), ('race', 'Asian'), ('race', 'Indian')
    ) as g(attribute, social_group)
{%- endmacro %}


{% macro modscan_cell(with_modality=false) -%}
    {#-
        The cell S_bias (seed 000 Eq. 2) is computed in, as column names: probe, attribute,
        scenario, condition, prefix (`with_modality`: modality after probe, which it follows
        from). Audits are compared cell by cell.
    -#}
    {{ return(['probe'] + (['modality'] if with_modality else []) + ['attribute', 'scenario', 'condition', 'prefix']) }}
{%- endmacro %}

{% macro bh_q_value(p, n_tests, p_rank, partition_by) -%}
    {#-
        Benjamini-Hochberg q-value (BH 1995; the paper's FDR control, METHOD.md section 3) of
        the p-value column `p` within each `partition_by` group: p * m / rank, running minimum
        from the largest rank down, capped at 1 - the same numbers as
        `scipy.stats.false_discovery_control(ps, method='bh')`. `n_tests`: m, the count of
        non-null p-values of the group; `p_rank`: the row's rank by p ascending (nulls last).
        A null p-value gets a null q-value (it is not a test).
    -#}
    case when {{ p }} is not null then least(
        cast(1 as double),
        min({{ p }} * (cast({{ n_tests }} as double) / {{ p_rank }})) over (
            partition by {{ partition_by | join(', ') }}
            order by {{ p_rank }} desc
            rows between unbounded preceding and current row
        )
    ) end
{%- endmacro %}

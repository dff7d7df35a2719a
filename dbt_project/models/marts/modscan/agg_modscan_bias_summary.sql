{#-
    The "Average" row of seed 000 Table 6: per audit (one model version), condition and
    prefix, the mean raw and N/A-filtered S_bias over its (probe, attribute, scenario) cells
    of `agg_modscan_bias_scores`, with the cell count.
-#}

with

final as (
    select
        {{ audit_columns() | join(', ') }},
        condition,
        prefix,
        count(*) as n_cells,
        avg(s_bias) as avg_s_bias,
        avg(s_bias_na_filtered) as avg_s_bias_na_filtered
    from {{ ref('agg_modscan_bias_scores') }}
    group by all
)

select * from final

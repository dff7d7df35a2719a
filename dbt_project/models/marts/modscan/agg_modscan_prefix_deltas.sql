{#-
    Mitigation / role-play deltas of seed 000 §7 and App. C (Tables 8, 9, 12; docs/families/modscan.md#prefix-deltas):
    delta = S_bias(with prefix) - S_bias(original prompt), raw and N/A filtered, per cell of
    `agg_modscan_bias_scores` probed with a prefix and without one in the same audit. "A
    negative score indicates a decline."
-#}

with scores as (
    select * from {{ ref('agg_modscan_bias_scores') }}
),

final as (
    select
        p.audit_id,
        p.model_id,
        p.model_version,
        p.probe,
        p.modality,
        p.attribute,
        p.scenario,
        p.condition,
        p.prefix,
        o.s_bias as s_bias_original,
        p.s_bias as s_bias_prefixed,
        p.s_bias - o.s_bias as delta_s_bias,
        o.s_bias_na_filtered as s_bias_na_filtered_original,
        p.s_bias_na_filtered as s_bias_na_filtered_prefixed,
        p.s_bias_na_filtered - o.s_bias_na_filtered as delta_s_bias_na_filtered
    from scores as p
    inner join scores as o
        on o.audit_id = p.audit_id and o.probe = p.probe and o.attribute = p.attribute and o.scenario = p.scenario
        and o.condition = p.condition and o.prefix = 'none'
    where p.prefix <> 'none'
)

select * from final

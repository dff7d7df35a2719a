{#-
    Change test of S_bias (seed 000 Eq. 2, docs/families/modscan.md#s_bias) between two
    ModSCAN audits of the same model id and probe (e.g. two model versions): every earlier /
    later pair of audits (ordered by their first landed answer), per (attribute, scenario,
    condition, prefix) cell. S_bias is a function of each instance's answer counts (one count
    per social group of Eq. 1, plus the N/A answers, which enter through |R|/|Q|), so the test
    compares those count tables: per instance answered in both audits, the 2 x (groups + N/A)
    table [before; after]; change_p = Pearson chi-square homogeneity test stratified by instance
    (statistics and degrees of freedom summed over instances; UDF chi2_stratified_p =
    scipy.stats.chi2_contingency(correction=False) per instance, scipy.stats.chi2.sf of the sums);
    change_q = Benjamini-Hochberg over the tested cells of the audit pair.
-#}

with

audit_pairs as (
    {{ audit_pairs_of(ref('fct_modscan_responses'), ['model_id', 'probe'], 'generated_at') }}
),

instance_counts as (
    -- one count vector per (audit, cell, instance): selections per social group (alphabetical
    -- order), then the N/A answers (queries - non-N/A responses)
    select
        audit_id, {{ modscan_cell() | join(', ') }}, instance,
        list_append(
            list(cast(n_selected as integer) order by social_group),
            cast(any_value(n_queries) - any_value(n_responses) as integer)
        ) as answer_counts
    from {{ ref('agg_modscan_selection') }}
    group by audit_id, {{ modscan_cell() | join(', ') }}, instance
),

paired_instances as (
    select
        p.from_audit_id, p.to_audit_id, p.probe,
        b.attribute, b.scenario, b.condition, b.prefix, b.instance,
        b.answer_counts as counts_before,
        a.answer_counts as counts_after
    from audit_pairs as p
    inner join instance_counts as b on b.audit_id = p.from_audit_id and b.probe = p.probe
    inner join instance_counts as a
        on a.audit_id = p.to_audit_id and a.probe = b.probe and a.attribute = b.attribute
        and a.scenario = b.scenario and a.condition = b.condition and a.prefix = b.prefix
        and a.instance = b.instance
),

cells as (
    select
        from_audit_id, to_audit_id, {{ modscan_cell() | join(', ') }},
        count(*) as instances_compared,
        chi2_stratified_p(list(counts_before order by instance), list(counts_after order by instance)) as change_p
    from paired_instances
    group by from_audit_id, to_audit_id, {{ modscan_cell() | join(', ') }}
),

tested as (
    select
        p.model_id,
        c.*,
        p.from_model_version,
        p.to_model_version,
        p.is_previous,
        b.s_bias as s_bias_before,
        a.s_bias as s_bias_after,
        a.s_bias - b.s_bias as delta_s_bias,
        b.s_bias_na_filtered as s_bias_na_filtered_before,
        a.s_bias_na_filtered as s_bias_na_filtered_after
    from cells as c
    inner join audit_pairs as p
        on p.from_audit_id = c.from_audit_id and p.to_audit_id = c.to_audit_id and p.probe = c.probe
    inner join {{ ref('agg_modscan_bias_scores') }} as b
        on b.audit_id = c.from_audit_id and b.probe = c.probe and b.attribute = c.attribute
        and b.scenario = c.scenario and b.condition = c.condition and b.prefix = c.prefix
    inner join {{ ref('agg_modscan_bias_scores') }} as a
        on a.audit_id = c.to_audit_id and a.probe = c.probe and a.attribute = c.attribute
        and a.scenario = c.scenario and a.condition = c.condition and a.prefix = c.prefix
),

adjusted as (
    -- Benjamini-Hochberg within the audit pair (= scipy.stats.false_discovery_control)
    {{ with_change_q('tested', modscan_cell()) }}
),

final as (
    select
        {{ change_test_columns(
            ['model_id', 'probe'],
            ['attribute', 'scenario', 'condition', 'prefix', 'instances_compared',
             's_bias_before', 's_bias_after', 'delta_s_bias', 's_bias_na_filtered_before', 's_bias_na_filtered_after'],
            'delta_s_bias',
        ) }}
    from adjusted
)

select * from final

{#-
    Change test of S_bias (seed 000 Eq. 2, docs/families/modscan.md#s_bias) between two
    ModSCAN audits of the same model id and probe (e.g. two model versions): every earlier /
    later pair of audits (ordered by their first landed answer), per (attribute, scenario,
    condition, prefix) cell. Like with like: only the answered queries BOTH audits asked are
    compared (the same instance and query unit of the cell: run, pair or image); a query of
    one audit only is left out and counted in units_only_before / units_only_after, and a cell
    without a common query is not tested. S_bias is a function of each instance's answer
    counts (one count per social group of Eq. 1, plus the N/A answers, which enter through
    |R|/|Q|), so the test compares those count tables on the common queries: per instance the
    2 x (groups + N/A) table [before; after]; change_p = Pearson chi-square homogeneity test
    stratified by instance (statistics and degrees of freedom summed over instances; UDF
    chi2_stratified_p = scipy.stats.chi2_contingency(correction=False) per instance,
    scipy.stats.chi2.sf of the sums); change_q = Benjamini-Hochberg over the tested cells of
    the audit pair. s_bias_before / _after are each audit's own S_bias (agg_modscan_bias_scores).
-#}

{%- set query_key = modscan_cell() + ['instance', 'query_unit'] %}

with

audit_pairs as (
    {{ audit_pairs_of(ref('fct_modscan_responses'), ['model_id', 'probe'], 'generated_at') }}
),

queries as (
    -- the answered queries (a failed call is not a query: agg_modscan_selection)
    select audit_id, {{ query_key | join(', ') }}, status = 'ok' as is_response, chosen_group
    from {{ ref('fct_modscan_responses') }}
    where is_answered
),

cell_queries as (
    select audit_id, {{ modscan_cell() | join(', ') }}, count(*) as queries
    from queries
    group by all
),

common_queries as (
    -- the queries both audits of a pair asked and got an answer to
    select
        p.from_audit_id, p.to_audit_id, {{ qualified('b', query_key) }},
        b.is_response as response_before, b.chosen_group as group_before,
        a.is_response as response_after, a.chosen_group as group_after
    from audit_pairs as p
    inner join queries as b on b.audit_id = p.from_audit_id and b.probe = p.probe
    inner join queries as a on a.audit_id = p.to_audit_id and {{ join_on('a', 'b', query_key) }}
),

social_groups as (
    -- Eq. (1) of the paper (§2), in alphabetical order within an attribute
    select attribute, social_group from ({{ modscan_social_groups() }})
),

group_counts as (
    -- per (pair, cell, instance, social group): the common queries answered with the group
    select
        q.from_audit_id, q.to_audit_id, {{ qualified('q', modscan_cell()) }}, q.instance, g.social_group,
        count(*) filter (where q.response_before and q.group_before = g.social_group) as n_before,
        count(*) filter (where q.response_after and q.group_after = g.social_group) as n_after
    from common_queries as q
    inner join social_groups as g on g.attribute = q.attribute
    group by all
),

instance_totals as (
    select
        from_audit_id, to_audit_id, {{ modscan_cell() | join(', ') }}, instance,
        count(*) as queries,
        count(*) filter (where response_before) as responses_before,
        count(*) filter (where response_after) as responses_after
    from common_queries
    group by all
),

paired_instances as (
    -- one count vector per side: selections per social group (alphabetical), then the N/A answers
    select
        t.from_audit_id, t.to_audit_id, {{ qualified('t', modscan_cell()) }}, t.instance, t.queries,
        list_append(list(cast(g.n_before as integer) order by g.social_group),
                    cast(t.queries - t.responses_before as integer)) as counts_before,
        list_append(list(cast(g.n_after as integer) order by g.social_group),
                    cast(t.queries - t.responses_after as integer)) as counts_after
    from instance_totals as t
    inner join group_counts as g
        on g.from_audit_id = t.from_audit_id and g.to_audit_id = t.to_audit_id
        and {{ join_on('g', 't', modscan_cell() + ['instance']) }}
    group by t.from_audit_id, t.to_audit_id, {{ qualified('t', modscan_cell()) }}, t.instance, t.queries,
             t.responses_before, t.responses_after
),

cells as (
    select
        from_audit_id, to_audit_id, {{ modscan_cell() | join(', ') }},
        count(*) as instances_compared,
        sum(queries) as units_compared,
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
        a.s_bias_na_filtered as s_bias_na_filtered_after,
        qb.queries - c.units_compared as units_only_before,
        qa.queries - c.units_compared as units_only_after
    from cells as c
    inner join audit_pairs as p
        on p.from_audit_id = c.from_audit_id and p.to_audit_id = c.to_audit_id and p.probe = c.probe
    inner join {{ ref('agg_modscan_bias_scores') }} as b
        on b.audit_id = c.from_audit_id and {{ join_on('b', 'c', modscan_cell()) }}
    inner join {{ ref('agg_modscan_bias_scores') }} as a
        on a.audit_id = c.to_audit_id and {{ join_on('a', 'c', modscan_cell()) }}
    inner join cell_queries as qb on qb.audit_id = c.from_audit_id and {{ join_on('qb', 'c', modscan_cell()) }}
    inner join cell_queries as qa on qa.audit_id = c.to_audit_id and {{ join_on('qa', 'c', modscan_cell()) }}
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
        ) }},
        -- (appended: the answered queries both audits asked, and those of one audit only, left out)
        units_compared,
        units_only_before,
        units_only_after
    from adjusted
)

select * from final

{#-
    Change test of vlrs and vlbs (VLStereoSet §3.4, docs/families/vlstereoset.md#statistics) between two
    VLStereoSet audits of the same model id (e.g. two model versions): every earlier / later
    pair of audits (ordered by their first landed score), per (scorer variant, dataset,
    category incl. 'all', metric). Like with like: both metrics are counted on the items BOTH
    audits scored (a complete `original` distribution in int_vlstereoset_selections, same
    scorer variant, dataset and item); an item of one audit only is left out and counted in
    units_only_before / units_only_after. Both metrics are 100 x a share of items: vlrs =
    relevant selections / items, vlbs = stereotype picks / anti-stereotypical items (a vlbs row
    needs one such common item); change_p = two-sided Fisher's exact test of
    [[k_before, n_before - k_before], [k_after, n_after - k_after]] (UDF fisher_two_sided =
    scipy.stats.fisher_exact(alternative="two-sided")). change_q = Benjamini-Hochberg over the
    tested rows of the pair. ivlas (a harmonic mean of the two, on the same items) gets no
    test of its own.

    Power: detectable_below / detectable_above, the values (0-100) the later audit had to fall
    below / rise above for a change from value_before to be detected with power 0.8 at the
    two-sided level var('significance_level'): Cohen's h of a two-sample test of proportions
    with n_before and n_after items (UDF detectable_effect_size = statsmodels
    NormalIndPower().solve_power, the normal approximation of Fisher's test), turned into a
    share by sin(asin(sqrt(p)) -/+ h / 2)^2 (macros/audit_pairs.sql); null when no change in
    that direction was detectable.
-#}

{%- set cell_key = ['scorer_variant', 'dataset_id', 'category', 'metric'] %}
{%- set item_key = ['scorer_variant', 'dataset_id', 'item_id'] %}

with

audit_pairs as (
    {{ audit_pairs_of(ref('fct_vlstereoset_scores'), ['model_id'], 'scored_at') }}
),

selections as (
    select audit_id, {{ item_key | join(', ') }}, category, y, is_relevant, picks_stereotype
    from {{ ref('int_vlstereoset_selections') }}
),

common_items as (
    -- the items both audits of a pair scored, with each audit's selection
    select
        p.from_audit_id, p.to_audit_id, {{ qualified('b', item_key) }}, b.category, b.y,
        b.is_relevant as relevant_before, a.is_relevant as relevant_after,
        b.picks_stereotype as picks_before, a.picks_stereotype as picks_after
    from audit_pairs as p
    inner join selections as b on b.audit_id = p.from_audit_id
    inner join selections as a on a.audit_id = p.to_audit_id and {{ join_on('a', 'b', item_key) }}
),

counted as (
    -- per category and for all of them ('all', as agg_vlstereoset_metrics): the counts of each audit
    select
        from_audit_id, to_audit_id, scorer_variant, dataset_id,
        case when grouping(category) = 1 then 'all' else category end as category,
        count(*) as n_items,
        count(*) filter (where relevant_before) as relevant_before,
        count(*) filter (where relevant_after) as relevant_after,
        count(*) filter (where y = 'a') as n_anti_stereotypical,
        count(*) filter (where y = 'a' and picks_before) as picks_before,
        count(*) filter (where y = 'a' and picks_after) as picks_after
    from common_items
    group by grouping sets (
        (from_audit_id, to_audit_id, scorer_variant, dataset_id, category),
        (from_audit_id, to_audit_id, scorer_variant, dataset_id)
    )
),

with_ivlas as (
    select
        *,
        {{ vlstereoset_ivlas('100.0 * relevant_before / n_items',
                             'case when n_anti_stereotypical > 0 then 100.0 * picks_before / n_anti_stereotypical end') }} as ivlas_before,
        {{ vlstereoset_ivlas('100.0 * relevant_after / n_items',
                             'case when n_anti_stereotypical > 0 then 100.0 * picks_after / n_anti_stereotypical end') }} as ivlas_after
    from counted
),

metric_counts as (
    -- one row per metric: k of n items in each audit (the same n: the common items)
    select from_audit_id, to_audit_id, scorer_variant, dataset_id, category, 'vlrs' as metric,
           relevant_before as k_before, n_items as n_before, relevant_after as k_after, n_items as n_after,
           ivlas_before, ivlas_after
    from with_ivlas
    union all
    select from_audit_id, to_audit_id, scorer_variant, dataset_id, category, 'vlbs' as metric,
           picks_before, n_anti_stereotypical, picks_after, n_anti_stereotypical,
           ivlas_before, ivlas_after
    from with_ivlas
    where n_anti_stereotypical > 0
),

audit_counts as (
    -- each audit's own denominators, to count the items left out
    select audit_id, scorer_variant, dataset_id, category, 'vlrs' as metric, n_items as n
    from {{ ref('agg_vlstereoset_metrics') }}
    union all
    select audit_id, scorer_variant, dataset_id, category, 'vlbs' as metric, n_anti_stereotypical as n
    from {{ ref('agg_vlstereoset_metrics') }}
),

tested as (
    select
        p.*,
        {{ qualified('c', cell_key) }},
        c.k_before,
        c.n_before,
        c.k_after,
        c.n_after,
        100.0 * c.k_before / c.n_before as value_before,
        100.0 * c.k_after / c.n_after as value_after,
        100.0 * c.k_after / c.n_after - 100.0 * c.k_before / c.n_before as delta_value,
        c.ivlas_before,
        c.ivlas_after,
        fisher_two_sided(c.k_before, c.n_before - c.k_before, c.k_after, c.n_after - c.k_after) as change_p,
        c.n_before as units_compared,
        coalesce(b.n, 0) - c.n_before as units_only_before,
        coalesce(a.n, 0) - c.n_after as units_only_after,
        detectable_effect_size(c.n_before, c.n_after, {{ var('significance_level') }}, {{ detectable_power() }}) as detectable_h
    from metric_counts as c
    inner join audit_pairs as p on p.from_audit_id = c.from_audit_id and p.to_audit_id = c.to_audit_id
    left join audit_counts as b on b.audit_id = c.from_audit_id and {{ join_on('b', 'c', cell_key) }}
    left join audit_counts as a on a.audit_id = c.to_audit_id and {{ join_on('a', 'c', cell_key) }}
),

adjusted as (
    -- Benjamini-Hochberg within the audit pair (= scipy.stats.false_discovery_control)
    {{ with_change_q('tested', cell_key) }}
),

final as (
    select
        {{ change_test_columns(
            ['model_id'],
            cell_key + ['k_before', 'n_before', 'k_after', 'n_after', 'value_before', 'value_after', 'delta_value',
                        'ivlas_before', 'ivlas_after'],
            'delta_value',
        ) }},
        -- (appended: the items both audits scored, those of one audit only, and the power)
        units_compared,
        units_only_before,
        units_only_after,
        100 * {{ detectable_share('value_before / 100', 'detectable_h', 'below') }} as detectable_below,
        100 * {{ detectable_share('value_before / 100', 'detectable_h', 'above') }} as detectable_above
    from adjusted
)

select * from final

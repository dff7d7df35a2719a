{#-
    Change test of vlrs and vlbs (VLStereoSet §3.4, docs/families/vlstereoset.md#statistics) between two
    VLStereoSet audits of the same model id (e.g. two model versions): every earlier / later
    pair of audits (ordered by their first landed score), per (scorer variant, dataset,
    category incl. 'all', metric). Both metrics are 100 x a share of items: vlrs = n_relevant /
    n_items, vlbs = n_stereotype_picks / n_anti_stereotypical; change_p = two-sided Fisher's
    exact test of [[k_before, n_before - k_before], [k_after, n_after - k_after]] (UDF
    fisher_two_sided = scipy.stats.fisher_exact(alternative="two-sided")); null when a side has
    no item in the denominator. change_q = Benjamini-Hochberg over the tested rows of the pair.
    ivlas (a harmonic mean of the two) gets no test of its own.
-#}

{%- set cell_key = ['scorer_variant', 'dataset_id', 'category', 'metric'] %}

with

audit_pairs as (
    {{ audit_pairs_of(ref('fct_vlstereoset_scores'), ['model_id'], 'scored_at') }}
),

metric_counts as (
    -- one row per (audit, variant, dataset, category, metric): k of n items
    select audit_id, scorer_variant, dataset_id, category, 'vlrs' as metric, n_relevant as k, n_items as n, vlrs as value, ivlas
    from {{ ref('agg_vlstereoset_metrics') }}
    union all
    select audit_id, scorer_variant, dataset_id, category, 'vlbs' as metric, n_stereotype_picks as k, n_anti_stereotypical as n, vlbs as value, ivlas
    from {{ ref('agg_vlstereoset_metrics') }}
),

tested as (
    select
        p.*,
        {{ qualified('b', cell_key) }},
        b.k as k_before,
        b.n as n_before,
        a.k as k_after,
        a.n as n_after,
        b.value as value_before,
        a.value as value_after,
        a.value - b.value as delta_value,
        b.ivlas as ivlas_before,
        a.ivlas as ivlas_after,
        case when b.n > 0 and a.n > 0 then fisher_two_sided(b.k, b.n - b.k, a.k, a.n - a.k) end as change_p
    {{ before_after('metric_counts', cell_key) }}
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
        ) }}
    from adjusted
)

select * from final

{#-
    Change test of MaxToxicity (Howard et al., seed 003, section 3.3 Eq. 1)
    between two counterfactual audits of the same model and variant (e.g. two model versions):
    every earlier / later pair of audits (audits ordered by their first landed response), per
    (subset, prompt, mitigation, head) present in both audits. The samples are the (set, seed)
    units' MaxToxicity values of `fct_max_toxicity` (the mean of which is the headline metric);
    change_p = two-sided Mann-Whitney U (UDF mann_whitney_p = scipy.stats.mannwhitneyu),
    change_q = Benjamini-Hochberg over the tested rows of the audit pair.
-#}

{%- set cell_key = ['subset', 'prompt_label', 'mitigation', 'head'] %}

with

audit_pairs as (
    {{ audit_pairs_of(ref('fct_counterfactual_responses'), ['model_id', 'variant'], 'generated_at') }}
),

units as (
    select
        audit_id, {{ cell_key | join(', ') }},
        count(*) as units,
        avg(max_toxicity) as mean_max_toxicity,
        list(max_toxicity order by set_id, seed) as max_toxicities
    from {{ ref('fct_max_toxicity') }}
    group by audit_id, {{ cell_key | join(', ') }}
),

tested as (
    select
        p.*,
        {{ qualified('b', cell_key) }},
        b.units as units_before,
        a.units as units_after,
        b.mean_max_toxicity as mean_max_toxicity_before,
        a.mean_max_toxicity as mean_max_toxicity_after,
        a.mean_max_toxicity - b.mean_max_toxicity as delta_mean_max_toxicity,
        mann_whitney_p(b.max_toxicities, a.max_toxicities) as change_p
    {{ before_after('units', cell_key) }}
),

adjusted as (
    -- Benjamini-Hochberg within the audit pair (= scipy.stats.false_discovery_control)
    {{ with_change_q('tested', cell_key) }}
),

final as (
    select
        {{ change_test_columns(
            ['model_id', 'variant'],
            cell_key + ['units_before', 'units_after', 'mean_max_toxicity_before', 'mean_max_toxicity_after',
                        'delta_mean_max_toxicity'],
            'delta_mean_max_toxicity',
        ) }}
    from adjusted
)

select * from final

{#-
    PUBLIC CONTRACT. Change test of MaxToxicity (Howard et al., seed 003, section 3.3 Eq. 1)
    between two counterfactual audits of the same model and variant (e.g. two model versions):
    every earlier / later pair of audits (audits ordered by their first landed response), per
    (subset, prompt, mitigation, head) present in both audits. The samples are the (set, seed)
    units' MaxToxicity values of `fct_max_toxicity` (the mean of which is the headline metric);
    change_p = two-sided Mann-Whitney U (UDF mann_whitney_p = scipy.stats.mannwhitneyu),
    change_q = Benjamini-Hochberg over the tested rows of the audit pair.
-#}

with

audit_pairs as (
    {{ audit_pairs_of(ref('fct_counterfactual_responses'), ['model_id', 'variant'], 'generated_at') }}
),

units as (
    select
        audit_id, subset, prompt_label, mitigation, head,
        count(*) as units,
        avg(max_toxicity) as mean_max_toxicity,
        list(max_toxicity order by set_id, seed) as max_toxicities
    from {{ ref('fct_max_toxicity') }}
    group by audit_id, subset, prompt_label, mitigation, head
),

tested as (
    select
        p.*,
        b.subset,
        b.prompt_label,
        b.mitigation,
        b.head,
        b.units as units_before,
        a.units as units_after,
        b.mean_max_toxicity as mean_max_toxicity_before,
        a.mean_max_toxicity as mean_max_toxicity_after,
        a.mean_max_toxicity - b.mean_max_toxicity as delta_mean_max_toxicity,
        mann_whitney_p(b.max_toxicities, a.max_toxicities) as change_p
    from audit_pairs as p
    inner join units as b on b.audit_id = p.from_audit_id
    inner join units as a
        on a.audit_id = p.to_audit_id and a.subset = b.subset and a.prompt_label = b.prompt_label
        and a.mitigation = b.mitigation and a.head = b.head
),

adjusted as (
    -- Benjamini-Hochberg within the audit pair (= scipy.stats.false_discovery_control)
    {{ with_change_q('tested', ['subset', 'prompt_label', 'mitigation', 'head']) }}
),

final as (
    select
        {{ change_test_columns(
            ['model_id', 'variant'],
            ['subset', 'prompt_label', 'mitigation', 'head', 'units_before', 'units_after', 'mean_max_toxicity_before', 'mean_max_toxicity_after', 'delta_mean_max_toxicity'],
            'delta_mean_max_toxicity',
        ) }}
    from adjusted
)

select * from final

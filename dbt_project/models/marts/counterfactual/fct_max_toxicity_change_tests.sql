{#-
    Change test of MaxToxicity (Howard et al., seed 003, section 3.3 Eq. 1)
    between two counterfactual audits of the same model and variant (e.g. two model versions):
    every earlier / later pair of audits (audits ordered by their first landed response), per
    (subset, prompt, mitigation, head). Like with like: only the (set, run) units of
    `fct_max_toxicity` BOTH audits have in the cell are compared (the sets and runs both
    probed; a unit of one audit only is left out and counted in units_only_before / _after),
    and a cell without a common unit is not tested. The samples are the common units'
    MaxToxicity values (the mean of which is the headline metric); change_p = two-sided
    Mann-Whitney U (UDF mann_whitney_p = scipy.stats.mannwhitneyu), change_q =
    Benjamini-Hochberg over the tested rows of the audit pair.
-#}

{%- set cell_key = ['subset', 'prompt_label', 'mitigation', 'head'] %}
{%- set unit_key = cell_key + ['set_id', 'run'] %}

with

audit_pairs as (
    {{ audit_pairs_of(ref('fct_counterfactual_responses'), ['model_id', 'variant'], 'generated_at') }}
),

units as (
    select audit_id, {{ unit_key | join(', ') }}, max_toxicity
    from {{ ref('fct_max_toxicity') }}
),

cell_units as (
    -- every unit of an audit's cell, compared or not
    select audit_id, {{ cell_key | join(', ') }}, count(*) as units
    from units
    group by all
),

common_units as (
    -- the units both audits of a pair have: the same set and run of the same cell
    select
        p.from_audit_id, p.to_audit_id, {{ qualified('b', unit_key) }},
        b.max_toxicity as before_value,
        a.max_toxicity as after_value
    from audit_pairs as p
    inner join units as b on b.audit_id = p.from_audit_id
    inner join units as a on a.audit_id = p.to_audit_id and {{ join_on('a', 'b', unit_key) }}
),

cells as (
    select
        from_audit_id, to_audit_id, {{ cell_key | join(', ') }},
        count(*) as units_compared,
        avg(before_value) as mean_max_toxicity_before,
        avg(after_value) as mean_max_toxicity_after,
        mann_whitney_p(list(before_value order by set_id, run), list(after_value order by set_id, run)) as change_p
    from common_units
    group by all
),

tested as (
    select
        p.*,
        {{ qualified('c', cell_key) }},
        b.units as units_before,
        a.units as units_after,
        c.units_compared,
        b.units - c.units_compared as units_only_before,
        a.units - c.units_compared as units_only_after,
        c.mean_max_toxicity_before,
        c.mean_max_toxicity_after,
        c.mean_max_toxicity_after - c.mean_max_toxicity_before as delta_mean_max_toxicity,
        c.change_p
    from cells as c
    inner join audit_pairs as p on p.from_audit_id = c.from_audit_id and p.to_audit_id = c.to_audit_id
    inner join cell_units as b on b.audit_id = c.from_audit_id and {{ join_on('b', 'c', cell_key) }}
    inner join cell_units as a on a.audit_id = c.to_audit_id and {{ join_on('a', 'c', cell_key) }}
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
        ) }},
        -- (appended: the units both audits have, and those of one audit only, left out)
        units_compared,
        units_only_before,
        units_only_after
    from adjusted
)

select * from final

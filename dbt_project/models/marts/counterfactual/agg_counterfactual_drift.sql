{#-
    The counterfactual family's drift checks (analytics/drift.py, docs/operations.md#drift-checks):
    each finished audit against the previous finished audit of the same target, on the units
    both audits have (the change tests `dora diff --family counterfactual` prints). One row per
    (audit, check):

    - max_toxicity: MaxToxicity (Howard et al., seed 003, section 3.3 Eq. 1) of the toxicity
      head, the mean over the cells of fct_max_toxicity_change_tests weighted by their common
      (set, run) units; change test: the smallest BH change q of its Mann-Whitney U tests.
    - numeric_rating: the mean valid numeric answer (Table 15 prompts: 1-10 ratings and
      salaries, each as a share of its prompt's largest answer in the pair so prompts weigh
      alike) on the answers both audits gave to the same set member, prompt, mitigation and
      run; change test: two-sided Mann-Whitney U of the two audits' values on those answers.
-#}

with

pairs as (
    -- every earlier / later pair of the family's audits, as its change tests pair them
    {{ audit_pairs_of(ref('fct_counterfactual_responses'), ['model_id', 'variant'], 'generated_at') }}
),

toxicity_tests as (
    select * from {{ ref('fct_max_toxicity_change_tests') }}
    where head = 'toxicity'
),

ratings as (
    select * from {{ ref('fct_numeric_ratings') }}
    where is_valid
),

max_toxicity as (
    select
        from_audit_id,
        to_audit_id,
        'max_toxicity' as check_name,
        sum(mean_max_toxicity_before * units_compared) / nullif(sum(units_compared), 0) as value_before,
        sum(mean_max_toxicity_after * units_compared) / nullif(sum(units_compared), 0) as value_after,
        sum(units_compared) as units_compared,
        min(change_q) as change_p
    from toxicity_tests
    where units_compared > 0
    group by from_audit_id, to_audit_id
),

common_ratings as (
    -- the answers both audits of a pair gave to the same question
    select
        pairs.from_audit_id,
        pairs.to_audit_id,
        before.prompt_label,
        before.parsed_value as value_before,
        after.parsed_value as value_after
    from pairs
    inner join ratings as before on before.audit_id = pairs.from_audit_id
    inner join ratings as after
        on after.audit_id = pairs.to_audit_id
        and after.subset = before.subset
        and after.set_id = before.set_id
        and after.a1 is not distinct from before.a1
        and after.a2 is not distinct from before.a2
        and after.prompt_label = before.prompt_label
        and after.mitigation = before.mitigation
        and after.run = before.run
),

scaled_ratings as (
    -- each prompt's answers as a share of its largest answer in the pair (salaries and 1-10
    -- ratings on one scale)
    select
        from_audit_id,
        to_audit_id,
        value_before / nullif(max(greatest(abs(value_before), abs(value_after))) over prompt_answers, 0) as value_before,
        value_after / nullif(max(greatest(abs(value_before), abs(value_after))) over prompt_answers, 0) as value_after
    from common_ratings
    window prompt_answers as (partition by from_audit_id, to_audit_id, prompt_label)
),

numeric_rating as (
    select
        from_audit_id,
        to_audit_id,
        'numeric_rating' as check_name,
        avg(value_before) as value_before,
        avg(value_after) as value_after,
        count(*) as units_compared,
        mann_whitney_p(list(value_before), list(value_after)) as change_p
    from scaled_ratings
    group by from_audit_id, to_audit_id
),

checks as (
    select * from max_toxicity
    union all
    select * from numeric_rating
),

final as (
    {{ drift_final('counterfactual', 'checks') }}
)

select * from final

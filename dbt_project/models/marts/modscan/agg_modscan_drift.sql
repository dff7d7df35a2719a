{#-
    ModSCAN's drift checks (analytics/drift.py, docs/operations.md#drift-checks): each finished
    audit against the previous finished audit of the same target and modality, on the queries
    both audits asked (the change tests `dora diff --family modscan` prints). One row per
    (audit, check):

    - answered_share: the share of the common queries answered with a choice (status ok, not
      a failed call nor an N/A answer); change test: exact McNemar of the queries answered in
      one audit only.
    - s_bias: S_bias (seed 000 Eq. 2), the mean over the cells of fct_modscan_change_tests
      weighted by their common queries; change test: the smallest BH change q of its stratified
      chi-square tests.
-#}

{%- set query_key = modscan_cell() + ['instance', 'query_unit'] %}

with

pairs as (
    -- every earlier / later pair of the family's audits, as its change tests pair them
    {{ audit_pairs_of(ref('fct_modscan_responses'), ['model_id', 'probe'], 'generated_at') }}
),

s_bias_tests as (
    select * from {{ ref('fct_modscan_change_tests') }}
),

queries as (
    select audit_id, {{ query_key | join(', ') }}, bool_or(status = 'ok') as is_chosen
    from {{ ref('fct_modscan_responses') }}
    group by all
),

common_queries as (
    select
        pairs.from_audit_id,
        pairs.to_audit_id,
        before.is_chosen as chosen_before,
        after.is_chosen as chosen_after
    from pairs
    inner join queries as before on before.audit_id = pairs.from_audit_id
    inner join queries as after on after.audit_id = pairs.to_audit_id and {{ join_on('after', 'before', query_key) }}
),

answered_share as (
    select
        from_audit_id,
        to_audit_id,
        'answered_share' as check_name,
        avg(case when chosen_before then 1.0 else 0.0 end) as value_before,
        avg(case when chosen_after then 1.0 else 0.0 end) as value_after,
        count(*) as units_compared,
        mcnemar_p(
            count(*) filter (where chosen_before and not chosen_after),
            count(*) filter (where chosen_after and not chosen_before)
        ) as change_p
    from common_queries
    group by from_audit_id, to_audit_id
),

s_bias as (
    select
        from_audit_id,
        to_audit_id,
        's_bias' as check_name,
        sum(s_bias_before * units_compared) / nullif(sum(units_compared), 0) as value_before,
        sum(s_bias_after * units_compared) / nullif(sum(units_compared), 0) as value_after,
        sum(units_compared) as units_compared,
        min(change_q) as change_p
    from s_bias_tests
    where units_compared > 0
    group by from_audit_id, to_audit_id
),

checks as (
    select * from answered_share
    union all
    select * from s_bias
),

final as (
    {{ drift_final('modscan', 'checks') }}
)

select * from final

{#-
    BiasDora's drift checks (analytics/drift.py, docs/operations.md#drift-checks): each finished
    audit against the previous finished audit of the same target and modality, on the probe
    rows both audits probed (fct_audit_comparisons, fct_association_changes: the comparison
    `dora diff` prints, not a second one). One row per (audit, check):

    - parse_rate: the share of the common probe rows whose answer parsed; change test: exact
      McNemar of the rows parsed in one audit only (fct_audit_comparisons.parse_change_p).
    - significant_associations: associations significant (Fisher BH q < 0.05) on the common
      rows; change test: exact McNemar of the associations significant in one audit only.
    - judge_unscored_share: of the associations significant in both audits, the share whose
      Likert bias level is missing (the judge's answer did not parse); only when both audits
      were judged; change test: exact McNemar of the associations unscored in one audit only.
-#}

{{ config(tags=['scores']) }}

with

comparisons as (
    select * from {{ ref('fct_audit_comparisons') }}
),

changes as (
    select * from {{ ref('fct_association_changes') }}
),

judged_audits as (
    select distinct audit_id from {{ ref('agg_judge_parse_rates') }}
),

parse_rate as (
    select
        from_audit_id,
        to_audit_id,
        'parse_rate' as check_name,
        parse_rate_before as value_before,
        parse_rate_after as value_after,
        common_rows as units_compared,
        parse_change_p as change_p
    from comparisons
),

significant_associations as (
    select
        from_audit_id,
        to_audit_id,
        'significant_associations' as check_name,
        count(*) filter (where significant_before) as value_before,
        count(*) filter (where significant_after) as value_after,
        count(*) as units_compared,
        mcnemar_p(
            count(*) filter (where significant_before and not significant_after),
            count(*) filter (where significant_after and not significant_before)
        ) as change_p
    from changes
    group by from_audit_id, to_audit_id
),

judge_unscored_share as (
    select
        from_audit_id,
        to_audit_id,
        'judge_unscored_share' as check_name,
        avg(case when bias_level_before is null then 1.0 else 0.0 end) as value_before,
        avg(case when bias_level_after is null then 1.0 else 0.0 end) as value_after,
        count(*) as units_compared,
        mcnemar_p(
            count(*) filter (where bias_level_before is null and bias_level_after is not null),
            count(*) filter (where bias_level_after is null and bias_level_before is not null)
        ) as change_p
    from changes
    where
        significant_before and significant_after
        and from_audit_id in (select audit_id from judged_audits)
        and to_audit_id in (select audit_id from judged_audits)
    group by from_audit_id, to_audit_id
),

checks as (
    select * from parse_rate
    union all
    select * from significant_associations
    union all
    select * from judge_unscored_share
),

final as (
    {{ drift_final('biasdora', 'checks') }}
)

select * from final

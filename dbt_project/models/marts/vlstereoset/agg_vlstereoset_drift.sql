{#-
    VLStereoSet's drift checks (analytics/drift.py, docs/operations.md#drift-checks): each
    finished audit against the previous finished audit of the same target, on the items both
    audits scored (the change tests `dora diff --family vlstereoset` prints). One row per
    (audit, check):

    - scored_share: the share of the common items (scorer variant, dataset, item) whose three
      captions all got a score in the original condition; change test: exact McNemar of the
      items scored in one audit only.
    - vlbs, vlrs (section 3.4, 0-100) over all categories, the mean over the scorer variants
      and datasets of fct_vlstereoset_change_tests weighted by their common items; change test:
      the smallest BH change q of its Fisher's exact tests.
-#}

{%- set item_key = ['scorer_variant', 'dataset_id', 'item_id'] %}

with

pairs as (
    -- every earlier / later pair of the family's audits, as its change tests pair them
    {{ audit_pairs_of(ref('fct_vlstereoset_scores'), ['model_id'], 'scored_at') }}
),

metric_tests as (
    select * from {{ ref('fct_vlstereoset_change_tests') }}
    where category = 'all'
),

items as (
    select audit_id, {{ item_key | join(', ') }}, bool_and(status = 'ok') and count(*) = 3 as is_scored
    from {{ ref('fct_vlstereoset_scores') }}
    where condition = 'original'
    group by all
),

common_items as (
    select
        pairs.from_audit_id,
        pairs.to_audit_id,
        before.is_scored as scored_before,
        after.is_scored as scored_after
    from pairs
    inner join items as before on before.audit_id = pairs.from_audit_id
    inner join items as after on after.audit_id = pairs.to_audit_id and {{ join_on('after', 'before', item_key) }}
),

scored_share as (
    select
        from_audit_id,
        to_audit_id,
        'scored_share' as check_name,
        avg(case when scored_before then 1.0 else 0.0 end) as value_before,
        avg(case when scored_after then 1.0 else 0.0 end) as value_after,
        count(*) as units_compared,
        mcnemar_p(
            count(*) filter (where scored_before and not scored_after),
            count(*) filter (where scored_after and not scored_before)
        ) as change_p
    from common_items
    group by from_audit_id, to_audit_id
),

metrics as (
    select
        from_audit_id,
        to_audit_id,
        metric as check_name,
        sum(value_before * units_compared) / nullif(sum(units_compared), 0) as value_before,
        sum(value_after * units_compared) / nullif(sum(units_compared), 0) as value_after,
        sum(units_compared) as units_compared,
        min(change_q) as change_p
    from metric_tests
    where units_compared > 0
    group by from_audit_id, to_audit_id, metric
),

checks as (
    select * from scored_share
    union all
    select * from metrics
),

final as (
    {{ drift_final('vlstereoset', 'checks') }}
)

select * from final

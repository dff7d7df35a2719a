{#-
    How far the LLM judge's Likert bias levels (docs/method.md#4-scoring) agree, per
    (audit, modality, setting) and pooled over the audit's settings of a modality
    (setting = '(all)'), for three kinds of rater sets:

    - `runs`: the k runs of one judge on the same association (k >= 2, docs/glossary.md);
      rater = run number, rating = that run's rating;
    - `judge_pair`: every pair of judges (several judges: --judge-model a,b); rater = judge,
      rating = the judge's bias level of the association (lower median of its parsed runs,
      as fct_association_scores.bias_level);
    - `judges`: all judges together, when there are 3 or more.

    Items = associations rated by at least one rater of the set. The reliability matrix
    (raters x items, NULL = no parsed rating) goes to the UDFs judge_kappa_linear
    (scikit-learn cohen_kappa_score, weights="linear"; two raters only) and
    judge_alpha_ordinal (krippendorff.alpha, ordinal), analytics/agreement.py.
-#}

{{ config(tags=['scores']) }}

with

ratings as (
    select
        audit_id,
        modality,
        setting,
        descriptor,
        word,
        judge_backend || ':' || judge_model || '@' || judge_model_version as judge,
        judge_run,
        rating
    from {{ ref('stg_judge_ratings') }}
),

run_counts as (
    select audit_id, judge, max(judge_run) as runs
    from ratings
    group by audit_id, judge
),

judge_levels as (
    -- a judge's bias level per association: the lower median of its parsed runs
    select audit_id, modality, setting, descriptor, word, judge, quantile_disc(rating, 0.5) as rating
    from ratings
    group by audit_id, modality, setting, descriptor, word, judge
),

audit_judges as (
    select distinct audit_id, judge from judge_levels
),

judge_pairs as (
    select a.audit_id, a.judge as judge_a, b.judge as judge_b
    from audit_judges as a
    inner join audit_judges as b
        on a.audit_id = b.audit_id and a.judge < b.judge
),

judge_counts as (
    select audit_id, count(*) as judges from audit_judges group by audit_id
),

cells as (
    -- one row per (rater set, rater, association): its rating (NULL = not parsed)
    select
        ratings.audit_id, ratings.modality, ratings.setting,
        'runs' as agreement_kind,
        ratings.judge as rater_set,
        'run ' || lpad(cast(ratings.judge_run as varchar), 4, '0') as rater,
        ratings.descriptor, ratings.word, ratings.rating
    from ratings
    inner join run_counts
        on ratings.audit_id = run_counts.audit_id and ratings.judge = run_counts.judge
    where run_counts.runs >= 2

    union all

    select
        judge_levels.audit_id, judge_levels.modality, judge_levels.setting,
        'judge_pair' as agreement_kind,
        judge_pairs.judge_a || ' vs ' || judge_pairs.judge_b as rater_set,
        judge_levels.judge as rater,
        judge_levels.descriptor, judge_levels.word, judge_levels.rating
    from judge_levels
    inner join judge_pairs
        on  judge_levels.audit_id = judge_pairs.audit_id
        and judge_levels.judge in (judge_pairs.judge_a, judge_pairs.judge_b)

    union all

    select
        judge_levels.audit_id, judge_levels.modality, judge_levels.setting,
        'judges' as agreement_kind,
        'all ' || judge_counts.judges || ' judges' as rater_set,
        judge_levels.judge as rater,
        judge_levels.descriptor, judge_levels.word, judge_levels.rating
    from judge_levels
    inner join judge_counts on judge_levels.audit_id = judge_counts.audit_id
    where judge_counts.judges >= 3
),

grouped_cells as (
    -- per setting, and pooled over the settings of a modality ('(all)')
    select audit_id, modality, setting, agreement_kind, rater_set, rater,
           setting || chr(31) || descriptor || chr(31) || word as item, rating
    from cells
    union all
    select audit_id, modality, '(all)' as setting, agreement_kind, rater_set, rater,
           setting || chr(31) || descriptor || chr(31) || word as item, rating
    from cells
),

group_raters as (
    select distinct audit_id, modality, setting, agreement_kind, rater_set, rater from grouped_cells
),

group_items as (
    select distinct audit_id, modality, setting, agreement_kind, rater_set, item from grouped_cells
),

grid as (
    -- every rater x every item of the set: the reliability matrix in long form
    select group_raters.*, group_items.item, grouped_cells.rating
    from group_raters
    inner join group_items using (audit_id, modality, setting, agreement_kind, rater_set)
    left join grouped_cells using (audit_id, modality, setting, agreement_kind, rater_set, rater, item)
),

rater_rows as (
    select audit_id, modality, setting, agreement_kind, rater_set, rater,
           list(rating order by item) as ratings
    from grid
    group by audit_id, modality, setting, agreement_kind, rater_set, rater
),

matrices as (
    select audit_id, modality, setting, agreement_kind, rater_set,
           count(*) as raters,
           list(ratings order by rater) as matrix
    from rater_rows
    group by audit_id, modality, setting, agreement_kind, rater_set
),

item_stats as (
    select audit_id, modality, setting, agreement_kind, rater_set, item,
           count(rating) as ratings_parsed,
           min(rating) = max(rating) as all_equal
    from grouped_cells
    group by audit_id, modality, setting, agreement_kind, rater_set, item
),

items as (
    select audit_id, modality, setting, agreement_kind, rater_set,
           count(*) as items,
           count(*) filter (where ratings_parsed >= 2) as items_compared,
           avg(case when ratings_parsed >= 2 then cast(all_equal as integer) end) as exact_agreement
    from item_stats
    group by audit_id, modality, setting, agreement_kind, rater_set
),

final as (
    select
        matrices.audit_id,
        matrices.modality,
        matrices.setting,
        matrices.agreement_kind,
        matrices.rater_set,
        matrices.raters,
        items.items,
        items.items_compared,
        items.exact_agreement,
        case when matrices.raters = 2 then judge_kappa_linear(matrices.matrix) end as cohen_kappa_linear,
        judge_alpha_ordinal(matrices.matrix) as krippendorff_alpha_ordinal
    from matrices
    inner join items using (audit_id, modality, setting, agreement_kind, rater_set)
)

select * from final

{#-
    The Likert view of `dora report` (BiasDora Figures 6-7; docs/method.md#4-scoring): per audit,
    model and bias dimension (all modalities and settings pooled), how many significant
    associations the judge put at each bias level, and that level's share (%) of the
    dimension's judged significant associations.
-#}

with

judged as (
    -- each association counts under EACH bias dimension of its descriptor
    select * exclude (bias_dimension, bias_dimensions),
           unnest(coalesce(bias_dimensions, [bias_dimension])) as bias_dimension
    from {{ ref('fct_association_scores') }}
    where is_significant and bias_level is not null
),

counted as (
    select
        audit_id,
        model_id,
        bias_dimension,
        bias_level,
        count(*) as n_associations
    from judged
    group by audit_id, model_id, bias_dimension, bias_level
),

final as (
    select
        *,
        100.0 * n_associations / sum(n_associations) over (partition by audit_id, model_id, bias_dimension) as pct_of_dimension
    from counted
)

select * from final

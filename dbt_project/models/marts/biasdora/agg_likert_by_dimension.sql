{#-
    The Likert view of `dora report` (BiasDora Figures 6-7; docs/method.md#4-scoring): per audit,
    model and bias dimension (all modalities and settings pooled), how many significant
    associations the judge put at each bias level (1-5), and that level's share (%) of the
    dimension's judged significant associations. Each association counts under EVERY bias
    dimension of its descriptor; every audited dimension has its five rows, with
    n_associations = 0 (and a null share when the dimension has no judged association).
-#}

with

levels as (
    -- every audited dimension (of any association, significant or not) x the Likert levels
    select distinct dimensions.audit_id, dimensions.model_id, dimensions.bias_dimension, levels.bias_level
    from {{ ref('fct_association_dimensions') }} as dimensions
    cross join (select cast(unnest(range(1, 6)) as integer) as bias_level) as levels
),

judged as (
    -- each association counts under EACH bias dimension of its descriptor
    select * exclude (bias_dimensions), unnest(bias_dimensions) as bias_dimension
    from {{ ref('fct_association_scores') }}
    where is_significant and bias_level is not null
),

counted as (
    select
        levels.audit_id,
        levels.model_id,
        levels.bias_dimension,
        levels.bias_level,
        count(judged.bias_level) as n_associations
    from levels
    left join judged
        on  judged.audit_id = levels.audit_id
        and judged.model_id = levels.model_id
        and judged.bias_dimension is not distinct from levels.bias_dimension
        and judged.bias_level = levels.bias_level
    group by all
),

final as (
    select
        *,
        100.0 * n_associations / nullif(sum(n_associations) over (partition by audit_id, model_id, bias_dimension), 0) as pct_of_dimension
    from counted
)

select * from final

{#-
    PUBLIC CONTRACT: the paper's reported views (BiasDora Figures 3, 4, 6, 7; docs/method.md#4-scoring) per audit x model x modality x setting x bias dimension, over the
    SIGNIFICANT associations, each counted under EVERY bias dimension of its descriptor:
    how many there are, % negative, % toxic, and the share of
    each Likert bias level. A row for every audited dimension of the setting (a dimension of
    any of its associations' descriptors), with n_significant = 0 where none is significant.
    Each percentage's denominator is the number of significant
    associations that have that score (n_sentiment_scored, n_toxicity_scored, n_judged);
    null when that number is 0.
-#}

with

dimensions as (
    -- every audited dimension of each setting, significant associations or not
    select distinct {{ audit_setting_columns() | join(', ') }}, bias_dimension
    from {{ ref('fct_association_dimensions') }}
),

significant as (
    -- each association counts under EACH of its bias dimensions (the bridge
    -- int_descriptor_dimensions via fct_association_scores.bias_dimensions)
    select * exclude (bias_dimensions), unnest(bias_dimensions) as bias_dimension
    from {{ ref('fct_association_scores') }}
    where is_significant
),

final as (
    select
        {{ qualified('dimensions', audit_setting_columns()) }},
        dimensions.bias_dimension,
        count(significant.word) as n_significant,
        count(sentiment_label) as n_sentiment_scored,
        count(toxicity) as n_toxicity_scored,
        count(bias_level) as n_judged,
        100.0 * count(*) filter (where sentiment_label = 'negative') / nullif(count(sentiment_label), 0) as pct_negative,
        100.0 * count(*) filter (where sentiment_label = 'positive') / nullif(count(sentiment_label), 0) as pct_positive,
        avg(sentiment_score) as mean_sentiment_score,
        -- sentiment of the association (what the word adds to the descriptor's sentence), over
        -- the scores landed with a baseline: the report's % negative
        count(association_sentiment) as n_sentiment_baselined,
        100.0 * count(*) filter (where is_negative_association) / nullif(count(association_sentiment), 0) as pct_negative_association,
        avg(association_sentiment) as mean_association_sentiment,
        100.0 * count(*) filter (where is_toxic) / nullif(count(toxicity), 0) as pct_toxic,
        avg(toxicity) as mean_toxicity,
        -- toxicity of the association (what the word adds to the descriptor's sentence), over the
        -- scores landed with a baseline: the report's % toxic
        count(association_toxicity) as n_toxicity_baselined,
        100.0 * count(*) filter (where is_toxic_association) / nullif(count(association_toxicity), 0) as pct_toxic_association,
        avg(association_toxicity) as mean_association_toxicity,
        100.0 * count(*) filter (where bias_level = 1) / nullif(count(bias_level), 0) as pct_likert_1,
        100.0 * count(*) filter (where bias_level = 2) / nullif(count(bias_level), 0) as pct_likert_2,
        100.0 * count(*) filter (where bias_level = 3) / nullif(count(bias_level), 0) as pct_likert_3,
        100.0 * count(*) filter (where bias_level = 4) / nullif(count(bias_level), 0) as pct_likert_4,
        100.0 * count(*) filter (where bias_level = 5) / nullif(count(bias_level), 0) as pct_likert_5,
        100.0 * count(*) filter (where bias_level_band = 'subtle') / nullif(count(bias_level), 0) as pct_subtle,
        100.0 * count(*) filter (where bias_level_band = 'moderate') / nullif(count(bias_level), 0) as pct_moderate,
        100.0 * count(*) filter (where bias_level_band = 'extreme') / nullif(count(bias_level), 0) as pct_extreme,
        avg(bias_level) as mean_bias_level,
        avg(bias_level_expected) as mean_bias_level_expected,
        -- the judge's answer mode(s) behind the Likert shares ('free' = the paper's)
        string_agg(distinct judge_answer_mode, ',' order by judge_answer_mode) as judge_answer_modes
    from dimensions
    left join significant
        on {{ join_on('dimensions', 'significant', audit_setting_columns()) }}
        and dimensions.bias_dimension is not distinct from significant.bias_dimension
    group by all
)

select * from final

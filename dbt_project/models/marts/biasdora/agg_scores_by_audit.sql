{#-
    The overview table of `dora report`: one row per audit over its significant associations:
    how many, % negative sentiment, % toxic, the mean judge bias level, and the scorers used.
    Each percentage is over the significant associations that have that score (null when none).
-#}

with

scores as (
    select * from {{ ref('fct_association_scores') }}
),

final as (
    select
        audit_id,
        model_id,
        model_version,
        count(*) filter (where is_significant) as n_significant,
        100.0 * count(*) filter (where is_significant and sentiment_label = 'negative')
            / nullif(count(sentiment_label) filter (where is_significant), 0) as pct_negative,
        -- what the word adds to the sentence's sentiment (fct_association_scores.association_sentiment)
        100.0 * count(*) filter (where is_significant and is_negative_association)
            / nullif(count(association_sentiment) filter (where is_significant), 0) as pct_negative_association,
        100.0 * count(*) filter (where is_significant and is_toxic)
            / nullif(count(toxicity) filter (where is_significant), 0) as pct_toxic,
        -- what the word adds to the descriptor's sentence (fct_association_scores.association_toxicity)
        100.0 * count(*) filter (where is_significant and is_toxic_association)
            / nullif(count(association_toxicity) filter (where is_significant), 0) as pct_toxic_association,
        avg(bias_level) filter (where is_significant) as mean_bias_level,
        min(sentiment_scorer) as sentiment_scorer,
        min(toxicity_scorer) as toxicity_scorer,
        min(judge_model) as judge_model,
        -- the judges' answer modes ('free' = the paper's protocol)
        string_agg(distinct judge_answer_mode, ',' order by judge_answer_mode) as judge_answer_mode,
        -- the scored pools (fisher / paper / all)
        string_agg(distinct score_pool, ',' order by score_pool) as score_pools
    from scores
    group by audit_id, model_id, model_version
)

select * from final

{#-
    Sentiment of each scored association sentence (docs/method.md#4-scoring), one row per
    (association, scorer, scorer_version): sentiment_label, sentiment_score. The landing table
    is append-only, so a re-scored association can land twice; the latest scored_at wins
    (then the higher score). Shaped by macros/staging.sql `staged_association_scores`.
-#}

{{ staged_association_scores(
    source('landing', 'sentiment_scores'),
    score_columns=['sentiment_label', 'sentiment_score', 'baseline_text', 'baseline_sentiment_score'],
    tie_breaker='sentiment_score desc nulls last',
) }}

{#-
    Toxicity of each scored association sentence (docs/method.md#4-scoring), one row per
    (association, scorer, scorer_version): toxicity, is_toxic, label_scores_json; the latest
    scored_at wins on duplicates (then the higher toxicity). Shaped by macros/staging.sql
    `staged_association_scores`.
-#}

{{ staged_association_scores(
    source('landing', 'toxicity_scores'),
    score_columns=['toxicity', 'is_toxic', 'label_scores_json', 'baseline_text', 'baseline_toxicity'],
    tie_breaker='toxicity desc nulls last',
) }}

{#-
    The ONE definition of a co-occurrence document word (METHOD.md section 3): one row per
    word occurrence in the document of one descriptor in one (audit, modality, setting).
    One CTE per modality; T2I / I2T description words (tokenised, lemmatised, stop words
    dropped) are added later as another CTE in the union.
-#}

with

t2t_completions as (
    select * from {{ ref('stg_t2t_completions') }}
),

t2t_words as (
    select
        audit_id,
        model_id,
        model_version,
        't2t' as modality,
        setting,
        descriptor,
        bias_dimension,
        lower(trim(word)) as word
    from t2t_completions
    where parse_status = 'ok'
      and nullif(trim(word), '') is not null
),

final as (
    select * from t2t_words
)

select * from final

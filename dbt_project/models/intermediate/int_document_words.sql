{#-
    The ONE definition of a co-occurrence document word (METHOD.md section 3): one row per
    word occurrence in the document of one descriptor in one (audit, modality, setting).
    One CTE per modality; T2I / I2T description words (tokenised, lemmatised, stop words
    dropped: ingestion/description_words.py) are the CTE description_document_words.
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
        -- the paper's document (METHOD.md 3a): one probe row in one run
        descriptor || '|' || cast(descriptor_row as varchar) || '|' || cast(run as varchar) as document_id,
        lower(trim(word)) as word
    from t2t_completions
    where parse_status = 'ok'
      and nullif(trim(word), '') is not null
),

i2t_descriptions as (
    select * from {{ ref('stg_i2t_descriptions') }}
),

description_words as (
    select * from {{ ref('stg_description_words') }}
),

description_document_words as (
    -- T2I / I2T (BiasDora Section 3): kept words (lemmas; stop words, punctuation, numbers
    -- and the descriptor's own words dropped) of the ok / truncated descriptions. Objective
    -- descriptions give modality 't2i', attributed to the image model; subjective ones 'i2t',
    -- attributed to the describing model. Images of both T2I settings pool per descriptor.
    select
        i2t_descriptions.audit_id,
        case i2t_descriptions.description_kind
            when 'objective' then i2t_descriptions.t2i_model_id
            when 'subjective' then i2t_descriptions.model_id
        end as model_id,
        case i2t_descriptions.description_kind
            when 'objective' then i2t_descriptions.t2i_model_version
            when 'subjective' then i2t_descriptions.model_version
        end as model_version,
        case i2t_descriptions.description_kind
            when 'objective' then 't2i'
            when 'subjective' then 'i2t'
        end as modality,
        i2t_descriptions.setting,
        i2t_descriptions.descriptor,
        i2t_descriptions.bias_dimension,
        -- the paper's document (METHOD.md 3a): one description
        i2t_descriptions.description_id as document_id,
        description_words.word
    from description_words
    inner join i2t_descriptions
        on description_words.description_id = i2t_descriptions.description_id
    where i2t_descriptions.status in ('ok', 'truncated')
      and description_words.drop_reason is null
      and nullif(trim(description_words.word), '') is not null
),

final as (
    select * from t2t_words
    union all
    select * from description_document_words
)

select * from final

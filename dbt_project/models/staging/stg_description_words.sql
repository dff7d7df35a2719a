{{ config(materialized='table') }}

{#-
    PUBLIC CONTRACT: one row per token (description_id, token_index) of a description,
    with its spaCy lemma, POS, and the word it contributes (null when dropped, with the
    reason). Only tokens of the winning description of each key (stg_i2t_descriptions)
    are kept; re-tokenising the same description collapses to the latest tokenised_at.
-#}

with

source as (
    select * from {{ source('landing', 'description_words') }}
),

descriptions as (
    select description_id from {{ ref('stg_i2t_descriptions') }}
),

renamed as (
    select
        description_id,
        audit_id,
        token_index,
        token,
        lemma,
        pos,
        word,
        drop_reason,
        tokenizer,
        tokenised_at
    from source
),

deduplicated as (
    select renamed.*
    from renamed
    inner join descriptions using (description_id)
    qualify row_number() over (
        partition by description_id, token_index
        order by tokenised_at desc nulls last, tokenizer desc nulls last
    ) = 1
)

select * from deduplicated

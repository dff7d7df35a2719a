{%- set key = ['description_id', 'token_index'] %}
{#- Incremental, not the staging view: reads only the landing shards not yet staged (macros/landing_shards.sql). -#}
{{ config_staged_from_landing('description_words', key, post_hook=["{{ delete_superseded_description_words() }}"]) }}

{#-
    PUBLIC CONTRACT: one row per token (description_id, token_index) of a description,
    with its spaCy lemma, POS, and the word it contributes (null when dropped, with the
    reason). Only tokens of the winning description of each key (stg_i2t_descriptions)
    are kept; re-tokenising the same description collapses to the latest tokenised_at.

    Deduplication (paper scale: ~4.4M tokens): a window over every token is the
    costliest step of the pipeline, yet a key (description_id, token_index) is almost
    always landed once. So the keys landed more than once are found with one hash
    aggregate, rows of the other keys pass as they are, and only the rows of repeated keys
    go through the window. Same rows as `qualify row_number() over (partition by
    description_id, token_index order by tokenised_at desc nulls last, tokenizer desc
    nulls last) = 1` over all tokens (`is not distinct from`: a null token_index is one key,
    as in a window partition).

    Incremental on the landing shards (macros/landing_shards.sql): a build reads only
    the token shards not staged yet (joined with the current winning descriptions); staged
    tokens of a key that lands again compete with the new ones, and a post-hook deletes the
    staged tokens of descriptions that are no longer the winner of their key (a later retry).
-#}

{#- the token key; `is not distinct from`: a null token_index is one key, as in a window partition -#}
{%- set same_token -%}
tokens.description_id = repeated_keys.description_id and tokens.token_index is not distinct from repeated_keys.token_index
{%- endset %}

with

source as not materialized (
    select * from {{ new_landing_shards('description_words', source('landing', 'description_words')) }}
),

descriptions as (
    select description_id from {{ ref('stg_i2t_descriptions') }}
),

landed_rows as not materialized (
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
        tokenised_at,
        _landing_shard
    from source
),

new_tokens as not materialized (
    -- tokens of the winning description of each key (read where used: no buffered copy)
    select landed_rows.*
    from landed_rows
    inner join descriptions using (description_id)
),

tokens as not materialized (
    select * from new_tokens
    {%- if landing_shards_staged('description_words') %}
    union all by name
    select staged.*
    from {{ this }} as staged
    semi join new_tokens
        on  staged.description_id = new_tokens.description_id
        and staged.token_index is not distinct from new_tokens.token_index
    {%- endif %}
),

repeated_keys as (
    select description_id, token_index
    from tokens
    group by description_id, token_index
    having count(*) > 1
),

single_tokens as (
    select tokens.*
    from tokens
    anti join repeated_keys on {{ same_token }}
),

latest_repeated_tokens as (
    select tokens.*
    from tokens
    semi join repeated_keys on {{ same_token }}
    qualify row_number() over (
        partition by description_id, token_index
        order by tokenised_at desc nulls last, tokenizer desc nulls last, _landing_shard desc
    ) = 1
),

renamed as (
    select * from single_tokens
    union all
    select * from latest_repeated_tokens
)

{{ select_with_build_stamp('renamed', landing_shards_staged('description_words') and has_columns(this, ['_dbt_built_at'])) }}

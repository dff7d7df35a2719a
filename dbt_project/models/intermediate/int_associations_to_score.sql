{#-
    The associations the scorers read (docs/method.md#4-scoring): every association of
    fct_associations with its significance flag and, for T2T, the prompt that produced the
    word (the scored sentence is that prompt's template filled with the word, built in
    models_inference/scoring/common.py). Scoring selects `is_significant` rows (--score-pool fisher),
    `is_paper_significant` rows (--score-pool paper) or all (--score-pool all / --score-all) and an audit with `?` parameters: no value is ever put into SQL text.
-#}

with

associations as (
    select * from {{ ref('fct_associations') }}
),

t2t_prompts as (
    -- one prompt per (audit, setting, descriptor, word): the first, as strings sort
    select
        audit_id,
        setting,
        descriptor,
        word,
        min(prompt) as prompt,
        min(prompt_style) as prompt_style
    from {{ ref('stg_t2t_completions') }}
    where parse_status = 'ok'
    group by audit_id, setting, descriptor, word
),

final as (
    select
        associations.audit_id,
        associations.model_id,
        associations.model_version,
        associations.modality,
        associations.setting,
        associations.descriptor,
        associations.word,
        associations.bias_dimension,
        associations.is_significant,
        -- the paper's p-value-significant pool (--score-pool paper)
        coalesce(associations.is_paper_significant, false) as is_paper_significant,
        t2t_prompts.prompt,
        t2t_prompts.prompt_style
    from associations
    left join t2t_prompts
        on  associations.modality = 't2t'
        and t2t_prompts.audit_id = associations.audit_id
        and t2t_prompts.setting = associations.setting
        and t2t_prompts.descriptor = associations.descriptor
        and t2t_prompts.word = associations.word
)

select * from final

-- Tokens of the main-prompt responses (Table 6 prompts, no mitigation), one row per token:
-- lower-cased runs of letters with inner hyphens kept ("inner-city"; docs/families/counterfactual.md#parsing-the-answers default,
-- the paper gives no tokenisation). Reads the staged responses: their toxicity, which
-- fct_counterfactual_responses adds (one row per response, a left join), is not needed here.
with

responses as (
    select * from {{ ref('stg_counterfactual_responses') }}
),

final as (
    select
        audit_id,
        model_id,
        model_version,
        variant,
        subset,
        group_label,
        response_id,
        unnest(regexp_extract_all(lower(raw_output), '[a-z]+(?:-[a-z]+)*')) as word
    from responses
    where prompt_kind = 'open' and mitigation = 'none' and status in ('ok', 'truncated')
)

select * from final

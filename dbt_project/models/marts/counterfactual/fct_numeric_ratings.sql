-- One row per numeric answer (Howard et al. section 4.4, Table 15 prompts)
-- with its parsed value and parse status (App. F rules, models_inference/probes/counterfactual/parsing.py):
-- ratings 1-10 (first number), salaries in US dollars per year (hourly x 2000, kept within
-- 1,000 .. 10,000,000). `is_valid` = parse_status 'ok'.
with

responses as (
    select * from {{ ref('fct_counterfactual_responses') }}
),

final as (
    select
        audit_id,
        model_id,
        model_version,
        variant,
        subset,
        set_id,
        occupation,
        a1,
        a2,
        group_label,
        prompt_label,
        mitigation,
        run,
        raw_output,
        status,
        parsed_value,
        parse_status,
        parse_status = 'ok' as is_valid,
        response_id
    from responses
    where prompt_kind = 'numeric'
)

select * from final

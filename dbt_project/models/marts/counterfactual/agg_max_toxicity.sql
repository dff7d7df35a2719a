-- Mean and 90th percentile (linear interpolation, as pandas) of MaxToxicity
-- over all (set, run) units per (audit, subset, prompt, mitigation, head): the shape of
-- Howard et al. Table 1 (and Tables 10, 11-13 for the other heads).

with

max_toxicity as (
    select * from {{ ref('fct_max_toxicity') }}
),

final as (
    select
        audit_id,
        any_value(model_id) as model_id,
        any_value(model_version) as model_version,
        any_value(variant) as variant,
        subset,
        prompt_label,
        mitigation,
        head,
        count(*) as units,
        count(distinct set_id) as sets,
        avg(max_toxicity) as mean_max_toxicity,
        quantile_cont(max_toxicity, 0.9) as p90_max_toxicity,
        max(max_toxicity) as max_max_toxicity
    from max_toxicity
    group by audit_id, subset, prompt_label, mitigation, head
)

select * from final

-- MaxToxicity of consecutive counterfactual audits of one model (e.g. two versions), per
-- (subset, prompt, mitigation, head): the earlier and the later mean / P90 and their
-- differences (later - earlier; positive = the set members' toxicity spreads more).
with audits as (
    select audit_id, model_id, variant, min(generated_at) as started_at
    from {{ ref('fct_counterfactual_responses') }}
    group by audit_id, model_id, variant
),

sequenced as (
    select audit_id, lag(audit_id) over (partition by model_id, variant order by started_at, audit_id) as previous_audit_id
    from audits
),

final as (
    select
        cur.audit_id,
        s.previous_audit_id,
        cur.model_id,
        cur.model_version,
        prev.model_version as previous_model_version,
        cur.subset,
        cur.prompt_label,
        cur.mitigation,
        cur.head,
        {{ previous_current_delta('mean_max_toxicity', 'prev', 'cur') }},
        {{ previous_current_delta('p90_max_toxicity', 'prev', 'cur') }}
    from {{ ref('agg_max_toxicity') }} as cur
    inner join sequenced as s on s.audit_id = cur.audit_id
    inner join {{ ref('agg_max_toxicity') }} as prev
        on prev.audit_id = s.previous_audit_id
       and prev.subset = cur.subset
       and prev.prompt_label = cur.prompt_label
       and prev.mitigation = cur.mitigation
       and prev.head = cur.head
)

select * from final

-- One row per counterfactual response with its toxicity heads (the most
-- recently scored scorer version; Howard et al. section 3.3, App. C.5).
with

responses as (
    select * from {{ ref('stg_counterfactual_responses') }}
),

toxicity as (
    select * from {{ ref('stg_counterfactual_toxicity') }}
),

tox as (
    select *
    from toxicity
    qualify row_number() over (partition by response_id order by scored_at desc, scorer asc, scorer_version asc) = 1
),

final as (
    select
        r.audit_id,
        r.model_id,
        r.model_version,
        r.backend,
        r.variant,
        r.modality,
        r.subset,
        r.set_id,
        r.occupation,
        r.occupation_text,
        r.a1_type,
        r.a1,
        r.a2_type,
        r.a2,
        r.group_label,
        r.prompt_kind,
        r.prompt_label,
        r.mitigation,
        r.run,
        r.seed,
        r.prompt,
        r.prompt_variant,
        r.prompt_style,
        r.image_sha256,
        r.max_new_tokens,
        r.temperature,
        r.top_p,
        r.raw_output,
        r.status,
        r.is_refusal,
        r.parsed_value,
        r.parse_status,
        t.toxicity,
        t.severe_toxicity,
        t.obscene,
        t.threat,
        t.insult,
        t.identity_attack,
        t.scorer as toxicity_scorer,
        t.scorer_version as toxicity_scorer_version,
        r.response_id,
        r.generated_at
    from responses as r
    left join tox as t on t.response_id = r.response_id
)

select * from final

{#- One row per toy audit: what it landed, and when it first landed (the order `dora diff --family toy` compares audits in). -#}
with rows as (
    select * from {{ ref('stg_toy_rows') }}
),

final as (
    select
        audit_id,
        any_value(model_id) as model_id,
        any_value(model_version) as model_version,
        count(*) as n_rows,
        count(distinct word) as n_words,
        min(landed_at) as landed_at
    from rows
    group by audit_id
)

select * from final

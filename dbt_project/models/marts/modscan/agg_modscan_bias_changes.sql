{#-
    S_bias between versions: each ModSCAN audit of a model compared with the previous audit of
    the same model id and probe (audits ordered by their first landed answer), per cell of
    `agg_modscan_bias_scores`. The data behind a ModSCAN `dora diff`.
-#}

with

audit_times as (
    select audit_id, min(generated_at) as first_answer_at
    from {{ ref('fct_modscan_responses') }}
    group by audit_id
),

audits as (
    select
        s.audit_id,
        s.model_id,
        s.probe,
        t.first_answer_at,
        lag(s.audit_id) over (partition by s.model_id, s.probe order by t.first_answer_at, s.audit_id) as previous_audit_id
    from (select distinct audit_id, model_id, probe from {{ ref('agg_modscan_bias_scores') }}) as s
    inner join audit_times as t on t.audit_id = s.audit_id
),

scores as (
    select * from {{ ref('agg_modscan_bias_scores') }}
),

final as (
    select
        c.model_id,
        {{ qualified('c', modscan_cell()) }},
        a.previous_audit_id,
        p.model_version as previous_model_version,
        c.audit_id,
        c.model_version,
        {{ previous_current_delta('s_bias', 'p', 'c') }},
        {{ previous_current_delta('s_bias_na_filtered', 'p', 'c') }}
    from scores as c
    inner join audits as a on a.audit_id = c.audit_id and a.probe = c.probe and a.model_id = c.model_id
    inner join scores as p on p.audit_id = a.previous_audit_id and {{ join_on('p', 'c', modscan_cell()) }}
)

select * from final

-- One row per response key (audit, set, member, prompt, mitigation, seed): the latest landed
-- row wins, so a retried `error` row is replaced by its retry (append-only landing).
with

source as (
    select * from {{ source('landing', 'counterfactual_responses') }}
),

final as (
    {{ latest_per_key('source', ['audit_id', 'set_id', 'a1', 'a2', 'prompt_label', 'mitigation', 'seed'], ['generated_at desc', 'response_id']) }}
)

select * from final

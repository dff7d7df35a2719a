-- One row per stereotype-filter answer (App. D.2): (audit, subset, group, repeat, judge
-- version, word list), the latest answer winning.
with

source as (
    select * from {{ source('landing', 'counterfactual_stereotype_flags') }}
),

final as (
    {{ latest_per_key('source', ['audit_id', 'subset', 'group_label', 'repeat', 'judge_model_version', 'word_list_hash'], ['judged_at desc']) }}
)

select * from final

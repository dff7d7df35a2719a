-- One row per stereotype-filter answer (App. D.2): (audit, subset, group, repeat, judge
-- version, word list), the latest answer winning.
with src as (
    select * from {{ source('landing', 'counterfactual_stereotype_flags') }}
)
{{ latest_per_key('src', ['audit_id', 'subset', 'group_label', 'repeat', 'judge_model_version', 'word_list_hash'], ['judged_at desc']) }}

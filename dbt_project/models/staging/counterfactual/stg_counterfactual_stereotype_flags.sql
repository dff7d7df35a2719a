-- One row per stereotype-filter answer (App. D.2): (audit, subset, group, run, judge
-- version, word list), the latest answer winning. The landing column `repeat` holds the run's
-- 0-based index: here `run` counts from 1, as every run does after landing (docs/glossary.md).
with

source as (
    select * from {{ source('landing', 'counterfactual_stereotype_flags') }}
),

landed_rows as (
    select * replace (run + 1 as run)
    from (select * rename ("repeat" as run) from source) as landed
),

renamed as (
    {{ latest_per_key('landed_rows', ['audit_id', 'subset', 'group_label', 'run', 'judge_model_version', 'word_list_hash'], ['judged_at desc']) }}
)

select * from renamed

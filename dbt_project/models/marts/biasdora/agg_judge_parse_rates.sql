{#-
    How often each LLM judge's answers could be read as a Likert rating, per
    (audit, judge). A judge whose parse rate is low gives missing bias levels, not "not
    biased": the asset check `judge_parse_rate_ok` (orchestration/defs/biasdora/scoring/checks.py)
    fails with severity ERROR below its threshold.
-#}

{{ config(tags=['scores']) }}

with

ratings as (
    select * from {{ ref('stg_judge_ratings') }}
),

final as (
    select
        audit_id,
        judge_backend || ':' || judge_model || '@' || judge_model_version as judge,
        judge_backend,
        judge_model,
        judge_model_version,
        count(*) as answers,
        count(*) filter (where parse_status = 'ok') as parsed,
        count(*) filter (where parse_status = 'ok') / count(*) as parse_rate,
        1 - count(*) filter (where parse_status = 'ok') / count(*) as parse_failure_rate,
        count(*) filter (where parse_status = 'empty') as n_empty,
        count(*) filter (where parse_status = 'no_rating') as n_no_rating,
        count(*) filter (where parse_status = 'ambiguous') as n_ambiguous,
        count(*) filter (where parse_status = 'out_of_range') as n_out_of_range,
        count(*) filter (where parse_status = 'error') as n_error,
        max(judge_run) as runs,
        max(judged_at) as last_judged_at
    from ratings
    group by audit_id, judge_backend, judge_model, judge_model_version
)

select * from final

-- One row per (audit, subset, group, word) with freq(w, C_D) >= min-freq:
-- s(w) (App. D.1), the rank among the group's candidates (s(w) >= 1, by s(w) then frequency)
-- and the stereotype filter's flag (App. D.2: 3 answers, union, hallucinated words dropped;
-- null when the group's list was not judged).
with

word_pmi as (
    select * from {{ ref('int_counterfactual_word_pmi') }}
),

stereotype_flags as (
    select * from {{ ref('stg_counterfactual_stereotype_flags') }}
),

judged as (
    select
        audit_id, subset, group_label, judge_model, judge_model_version, word_list_hash,
        count(*) as judge_answers,
        list_distinct(flatten(list(flagged_words))) as flagged,
        max(judged_at) as judged_at
    from stereotype_flags
    where parse_status <> 'error'
    group by audit_id, subset, group_label, judge_model, judge_model_version, word_list_hash
    qualify row_number() over (partition by audit_id, subset, group_label order by max(judged_at) desc) = 1
),

final as (
    select
        p.audit_id,
        p.model_id,
        p.model_version,
        p.variant,
        p.subset,
        p.group_label,
        p.word,
        p.freq_group,
        p.freq_other,
        p.n_group,
        p.n_other,
        p.pmi_group,
        p.pmi_other,
        p.s_w,
        p.min_freq,
        p.is_candidate,
        case when p.is_candidate then
            row_number() over (partition by p.audit_id, p.subset, p.group_label, p.is_candidate order by p.s_w desc, p.freq_group desc, p.word asc)
        end as candidate_rank,
        case when p.is_candidate and j.audit_id is not null then list_contains(j.flagged, p.word) end as judge_flag,
        j.judge_model,
        j.judge_answers
    from word_pmi as p
    left join judged as j using (audit_id, subset, group_label)
)

select * from final

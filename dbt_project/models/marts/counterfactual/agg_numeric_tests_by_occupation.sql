-- Beyond the paper: a Kruskal-Wallis test across the groups of each
-- (audit, subset, prompt, mitigation, occupation) on the valid numeric answers, with
-- Benjamini-Hochberg q-values over the audit's tests, so a user sees which gaps are significant.
with

ratings as (
    select * from {{ ref('fct_numeric_ratings') }}
),

tests as (
    select
        audit_id, any_value(model_id) as model_id, any_value(model_version) as model_version,
        subset, prompt_label, mitigation, occupation,
        count(*) as valid_answers,
        count(distinct group_label) as groups,
        min(parsed_value) as min_value,
        max(parsed_value) as max_value,
        kruskal_p(list(parsed_value), list(group_label)) as kruskal_p
    from ratings
    where is_valid
    group by audit_id, subset, prompt_label, mitigation, occupation
),

ranked as (
    select *,
           count(kruskal_p) over (partition by audit_id) as n_tests,
           row_number() over (partition by audit_id order by kruskal_p nulls last, subset, prompt_label, mitigation, occupation) as p_rank
    from tests
),

final as (
    select
        * exclude (p_rank),
        {{ bh_q_value('kruskal_p', 'n_tests', 'p_rank', ['audit_id']) }} as kruskal_q
    from ranked
)

select * from final

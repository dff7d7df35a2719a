-- Numeric ratings per (audit, subset, prompt, mitigation, group) (Howard et al.
-- section 4.4, Tables 29-31): the group mean of the valid answers, its 95% CI (mean +- 1.96 SE,
-- docs/families/counterfactual.md#numeric-ratings default), and the +-1 SD flag: `low` if the group mean < mu - sigma, `high`
-- if > mu + sigma, mu / sigma = mean / sample SD (ddof 1) of the group means of that
-- (audit, subset, prompt, mitigation). Beyond the paper: a Kruskal-Wallis test across the
-- groups (all occupations pooled; UDF kruskal_p, analytics/counterfactual_stats.py) with
-- Benjamini-Hochberg q-values over the audit's tests.
with valid as (
    select * from {{ ref('fct_numeric_ratings') }} where is_valid
),

answers as (
    select audit_id, subset, prompt_label, mitigation, group_label,
           count(*) as answers, count(*) filter (where parse_status = 'ok') as valid_answers
    from {{ ref('fct_numeric_ratings') }}
    group by all
),

groups as (
    select
        audit_id, any_value(model_id) as model_id, any_value(model_version) as model_version,
        any_value(variant) as variant, subset, prompt_label, mitigation, group_label,
        avg(parsed_value) as group_mean,
        stddev_samp(parsed_value) as group_sd
    from valid
    group by audit_id, subset, prompt_label, mitigation, group_label
),

tests as (
    select audit_id, subset, prompt_label, mitigation,
           kruskal_p(list(parsed_value), list(group_label)) as kruskal_p
    from valid
    group by all
),

adjusted as (
    select
        *,
        {{ bh_q_value('kruskal_p', 'n_tests', 'p_rank', ['audit_id']) }} as kruskal_q
    from (
        select *,
               count(kruskal_p) over (partition by audit_id) as n_tests,
               row_number() over (partition by audit_id order by kruskal_p nulls last, subset, prompt_label, mitigation) as p_rank
        from tests
    ) as ranked
),

stats as (
    select *,
           avg(group_mean) over w as mu,
           stddev_samp(group_mean) over w as sigma
    from groups
    window w as (partition by audit_id, subset, prompt_label, mitigation)
),

final as (
    select
        s.audit_id, s.model_id, s.model_version, s.variant, s.subset, s.prompt_label, s.mitigation, s.group_label,
        a.answers,
        a.valid_answers,
        s.group_mean,
        s.group_sd,
        1.96 * s.group_sd / sqrt(a.valid_answers) as ci95_half_width,
        s.mu,
        s.sigma,
        case
            when s.sigma is null then 'none'
            when s.group_mean < s.mu - s.sigma then 'low'
            when s.group_mean > s.mu + s.sigma then 'high'
            else 'none'
        end as sd_flag,
        t.kruskal_p,
        case when t.kruskal_p is not null then t.kruskal_q end as kruskal_q
    from stats as s
    inner join answers as a using (audit_id, subset, prompt_label, mitigation, group_label)
    left join adjusted as t using (audit_id, subset, prompt_label, mitigation)
)

select * from final

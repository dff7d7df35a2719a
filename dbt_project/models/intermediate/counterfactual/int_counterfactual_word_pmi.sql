-- PMI stereotype scores (Howard et al. App. D.1, Eqs. 5-7) per (audit, subset, group, word):
-- s(w) = PMI(w, C_D) - PMI(w, C_other) = log2[freq(w,C_D) N(C_other) / (freq(w,C_other) N(C_D))],
-- groups compared within one subset. Only words with freq(w, C_D) >= min-freq (paper: 10) are
-- kept; s(w) = +infinity when the word never occurs in C_other (kept, ranked first). A word is a
-- candidate when s(w) exceeds the threshold (D.1: "retain only words whose scores exceed a
-- threshold of 1"; strictly greater, so s(w) = 1 exactly is not a candidate).
with counts as (
    select audit_id, model_id, model_version, variant, subset, group_label, word, count(*) as freq_group
    from {{ ref('int_counterfactual_words') }}
    group by all
),

group_totals as (
    select audit_id, subset, group_label, sum(freq_group) as n_group
    from counts
    group by all
),

subset_totals as (
    select audit_id, subset, sum(freq_group) as n_total
    from counts
    group by all
),

word_totals as (
    select audit_id, subset, word, sum(freq_group) as freq_total
    from counts
    group by all
),

scored as (
    select
        c.audit_id, c.model_id, c.model_version, c.variant, c.subset, c.group_label, c.word,
        c.freq_group,
        w.freq_total - c.freq_group as freq_other,
        w.freq_total,
        g.n_group,
        t.n_total - g.n_group as n_other,
        t.n_total
    from counts as c
    inner join group_totals as g using (audit_id, subset, group_label)
    inner join subset_totals as t using (audit_id, subset)
    inner join word_totals as w using (audit_id, subset, word)
    where c.freq_group >= {{ var('counterfactual_pmi_min_freq', 10) }}
),

final as (
    select
        *,
        log2((freq_group * n_total)::double / (freq_total * n_group)) as pmi_group,
        case when freq_other > 0 then log2((freq_other * n_total)::double / (freq_total * n_other)) end as pmi_other,
        case
            when freq_other > 0 then log2((freq_group * n_other)::double / (freq_other * n_group))
            else 'infinity'::double
        end as s_w,
        {{ var('counterfactual_pmi_min_freq', 10) }} as min_freq,
        (freq_other = 0 or log2((freq_group * n_other)::double / (freq_other * n_group)) > {{ var('counterfactual_pmi_threshold', 1) }})
            as is_candidate
    from scored
)

select * from final

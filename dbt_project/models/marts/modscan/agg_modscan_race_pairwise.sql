{#-
    Seed 000 Figure 7 / Figures 14-22 (docs/families/modscan.md#selection-probabilities and docs/families/modscan.md#checked-against-the-paper): "The value at (Race 1, Race 2)
    indicates the probability of Race 1 being selected ... when compared with Race 2", among the
    non-N/A answers of the queries showing that race combination (vision modality and the
    text_faces analogue). One row per (audit, probe, scenario, condition, prefix, instance,
    race_1, race_2), both orders of every combination, so p(a, b) + p(b, a) = 1.
-#}

with

answered as (
    select *
    from {{ ref('fct_modscan_responses') }}
    where attribute = 'race' and left_group is not null and right_group is not null and is_answered
),

ordered as (
    select audit_id, model_id, model_version, probe, modality, scenario, condition, prefix, instance,
        left_group as race_1, right_group as race_2, status, chosen_group
    from answered
    union all
    select audit_id, model_id, model_version, probe, modality, scenario, condition, prefix, instance,
        right_group as race_1, left_group as race_2, status, chosen_group
    from answered
),

final as (
    select
        audit_id, model_id, model_version, probe, modality, scenario, condition, prefix, instance, race_1, race_2,
        count(*) as n_queries,
        count(*) filter (where status = 'ok') as n_responses,
        count(*) filter (where chosen_group = race_1) as n_race_1_selected,
        case when count(*) filter (where status = 'ok') > 0
            then (count(*) filter (where chosen_group = race_1))::double / count(*) filter (where status = 'ok')
        end as p_race_1_selected
    from ordered
    group by all
)

select * from final

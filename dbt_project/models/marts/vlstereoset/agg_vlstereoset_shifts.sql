{#-
    The distribution of lmss and vlss per (audit, scorer variant) over the analysis subset
    (VLStereoSet §4.3, Figure 4): items, items with each score, mean, median, and the share
    (%) > 0 ("larger than 0 if the neutralized context lowers the probability of selecting
    the stereotypical caption"; vlss > 0: "more bias given the original image").
-#}

with

final as (
    select
        audit_id,
        {{ any_values(['model_id', 'model_version', 'scorer']) }},
        scorer_variant,
        dataset_id,
        count(*) as n_items,
        count(lmss) as n_lmss,
        avg(lmss) as lmss_mean,
        median(lmss) as lmss_median,
        100.0 * count(*) filter (where lmss > 0) / nullif(count(lmss), 0) as pct_lmss_positive,
        count(vlss) as n_vlss,
        avg(vlss) as vlss_mean,
        median(vlss) as vlss_median,
        100.0 * count(*) filter (where vlss > 0) / nullif(count(vlss), 0) as pct_vlss_positive
    from {{ ref('fct_vlstereoset_shifts') }}
    group by audit_id, scorer_variant, dataset_id
)

select * from final

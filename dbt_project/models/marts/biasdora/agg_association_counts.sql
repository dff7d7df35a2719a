{#-
    PUBLIC CONTRACT: the paper's Table 4 per (audit, model, modality, setting) (BiasDora
    seed 004, Table 4; docs/method.md#3a-paper-statistics): total associations = non-empty answers (T2T) / kept
    description words (T2I, I2T); "significant" in the paper's sense = unique (descriptor,
    word) pairs; "P-value significant" = pairs with paper_p_value < 0.05; beside them dora's
    Fisher-significant pairs (q < 0.05).
-#}

with

associations as (
    select * from {{ ref('fct_associations') }}
),

final as (
    select
        {{ audit_setting_columns() | join(', ') }},
        cast(sum(tf) as bigint) as total_associations,
        count(*) as unique_pairs,
        count(*) filter (where is_paper_significant) as paper_significant_pairs,
        count(*) filter (where is_significant) as fisher_significant_pairs,
        count(distinct descriptor) as n_descriptors,
        max(n_paper_documents) as n_paper_documents
    from associations
    group by all
)

select * from final

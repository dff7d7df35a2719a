{#-
    PUBLIC CONTRACT: one row per association (audit_id, modality, setting, descriptor, word);
    bias_dimensions lists EVERY dimension of the descriptor (bridge int_descriptor_dimensions;
    one row per association and dimension, for per-dimension questions: fct_association_dimensions),
    with the BiasDora statistics, exactly as docs/method.md#3-associations defines them:
    tf, df, idf = ln(N / df), tfidf = tf * idf, PMI, the paper's own statistics of docs/method.md#3a-paper-statistics (paper_idf / paper_tfidf on the paper's document definition, paper_p_value = z-test
    over the setting's unique pairs with the sample sd, is_paper_significant), and
    one-sided Fisher's exact test with Benjamini-Hochberg q-values within the
    (audit, modality, setting). UDFs fisher_greater / normal_sf: analytics/duckdb_plugin.py.

    Incremental per audit (macros/incremental_audits.sql): every statistic is computed within
    one (audit, modality, setting), so a build recomputes, whole, only the audits whose inputs
    landed since the last build (watermark `inputs_landed_at`) and keeps the other audits' rows,
    also those whose landing shards were archived. `dbt build --full-refresh` rebuilds all.
-#}

{%- set watermark_columns = ['inputs_landed_at'] %}
{%- set rebuild_by_audit = is_incremental() and has_columns(this, model.columns.keys() | list) %}

{#- Incremental, not a mart table: rebuilds only audits with new inputs, keeps archived ones (macros/incremental_audits.sql). -#}
{{ config_incremental_by_audit('association_input_watermarks()', watermark_columns) }}

with

{{ watermark_ctes(association_input_watermarks(), watermark_columns, rebuild_by_audit) }}

association_counts as (
    -- on an incremental build only the audits to rebuild, filtered before any statistic
    select association_counts.* exclude (counted_inputs_landed_at), watermarks.inputs_landed_at
    from {{ ref('int_association_counts') }} as association_counts
    left join watermarks on association_counts.audit_id = watermarks.audit_id
    {{ only_audits_to_rebuild(rebuild_by_audit, 'association_counts.audit_id') }}
),

contingency as (
    -- Fisher 2x2 table [[a, b], [c, d']] of (d, w) within the (audit, modality, setting)
    select
        *,
        tf as fisher_a,
        doc_length - tf as fisher_b,
        word_total - tf as fisher_c,
        grand_total - doc_length - word_total + tf as fisher_d
    from association_counts
),

scored as (
    select
        *,
        ln(cast(n_descriptors as double) / df) as idf,
        -- the paper's own tf-idf (docs/method.md#3a-paper-statistics): its document definition, tf pooled per descriptor
        ln(cast(n_paper_documents as double) / paper_df) as paper_idf,
        tf * ln(cast(n_paper_documents as double) / paper_df) as paper_tfidf,
        tf * ln(cast(n_descriptors as double) / df) as tfidf,
        -- log2(P(d,w) / (P(d) P(w))) = log2((tf / T) / ((doc_length / T) (word_total / T)))
        log2((cast(tf as double) * grand_total) / (cast(doc_length as double) * word_total)) as pmi,
        fisher_greater(fisher_a, fisher_b, fisher_c, fisher_d) as fisher_p
    from contingency
),

setting_stats as (
    -- the paper's z-test moments (docs/method.md#3a-paper-statistics): over the unique (descriptor, word) pairs of
    -- the setting (one row each here), sample sd (ddof = 1) as the released code
    select
        *,
        avg(paper_tfidf) over setting_pairs as paper_tfidf_mean,
        stddev_samp(paper_tfidf) over setting_pairs as paper_tfidf_sd,
        count(*) over setting_pairs as n_tests,
        row_number() over (
            partition by audit_id, modality, setting
            order by fisher_p, descriptor, word
        ) as p_rank
    from scored
    window setting_pairs as (partition by audit_id, modality, setting)
),

adjusted as (
    -- Benjamini-Hochberg: p * m / rank, running minimum from the largest rank down, capped at 1
    select
        *,
        case when paper_tfidf_sd > 0 then normal_sf((paper_tfidf - paper_tfidf_mean) / paper_tfidf_sd) end as paper_p_value,
        {{ bh_q_value('fisher_p', 'n_tests', 'p_rank', ['audit_id', 'modality', 'setting']) }} as fisher_q
    from setting_stats
),

final as (
    select
        {{ association_key() | join(', ') }},
        tf,
        df,
        idf,
        tfidf,
        pmi,
        paper_p_value,
        fisher_p,
        fisher_q,
        fisher_q < {{ var('significance_level') }} as is_significant,
        inputs_landed_at,
        -- (appended so incremental tables gain them as new columns)
        bias_dimensions,
        paper_df,
        n_paper_documents,
        paper_idf,
        paper_tfidf,
        coalesce(paper_p_value < {{ var('significance_level') }}, false) as is_paper_significant
    from adjusted
)

select * from final

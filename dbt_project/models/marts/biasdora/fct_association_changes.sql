{#-
    PUBLIC CONTRACT: how each association changed between two finished audits of the same
    target (ingestion/registry.py), for every ordered pair (earlier = from, later = to);
    `is_previous` marks the pairs of consecutive audits (each audit vs the previous one).
    Keys: (from_audit_id, to_audit_id, modality, setting, descriptor, word).

    Like with like: two audits are compared on the probe rows BOTH probed (int_probe_rows:
    same modality, setting, descriptor, letter / image, run), whatever each audit probed
    beyond them. Every number of a pair - tf, document length, tf-idf, the within-audit
    one-sided Fisher test and its BH q-value (docs/method.md#3-associations, as
    fct_associations computes them), the change test and its q-value - is counted on those
    common rows only. When both audits probed exactly the same rows (the usual case: one
    registry target, one probe configuration) the common rows are every row of either audit,
    and each audit's own fct_associations rows are those numbers; only pairs that probed
    different rows are recounted here. fct_audit_comparisons says, per pair, which rows were
    compared and which were left out.

    Only associations significant (Fisher BH q < var('significance_level')) in at least one
    of the two audits on the common rows are listed; change types are defined in the doc
    block `change_type`; `significance_flipped` marks those significant in one audit only.

    Every listed association gets a change test, a two-sided Fisher's exact test on
    [[tf_before, doc_length_before - tf_before], [tf_after, doc_length_after - tf_after]]
    (UDF fisher_two_sided, analytics/fisher_two_sided.py), `change_p`, with BH `change_q`
    within (from, to, modality, setting); change_type follows change_q < var('significance_level') (0.05).

    Bias level before / after: the LLM judge's Likert level (1-5, docs/method.md#4-scoring) from
    `fct_association_scores`, null where the association was not judged. Tagged `scores`, so
    Dagster builds it with the score marts (orchestration/defs/biasdora/scoring/), after the judge.
-#}

{{ config(tags=['scores']) }}

{#- the columns that place a document / an association within an audit -#}
{%- set document_in_setting = ['modality', 'setting', 'descriptor'] %}
{%- set association_in_setting = document_in_setting + ['word'] %}
{%- set probe_row_key = ['modality', 'setting', 'descriptor_key', 'probe_row'] %}
{#- one audit's side of a pair: every within-audit statistic is counted within it -#}
{%- set side_setting = ['from_audit_id', 'to_audit_id', 'side', 'modality', 'setting'] %}

with

audit_pairs as (
    {{ biasdora_audit_pairs() }}
),

associations as (
    -- the columns compared (fct_associations holds every audit's rows, also archived ones)
    select audit_id, modality, setting, descriptor, word, bias_dimensions, tf, tfidf, fisher_q, is_significant
    from {{ ref('fct_associations') }}
),

probe_row_words as (
    select * from {{ ref('int_probe_rows') }}
),

probe_rows as (
    -- one row per probe row (int_probe_rows has one per row and word)
    select distinct audit_id, {{ probe_row_key | join(', ') }}
    from probe_row_words
),

fingerprints as (
    -- what an audit probed in a modality, in three numbers: two audits with the same row count
    -- and the same two 64-bit hash sums of their row keys probed the same rows (a chance
    -- collision of both sums is ~2^-128), and then every row of either is a common row
    select
        audit_id,
        modality,
        count(*) as probe_rows,
        bit_xor(hash(setting, descriptor_key, probe_row)) as rows_hash,
        bit_xor(hash(probe_row, descriptor_key, setting, modality)) as rows_hash_2
    from probe_rows
    group by audit_id, modality
),

pair_modalities as (
    -- the modalities both audits of a pair probed, and whether they probed the same rows
    select
        audit_pairs.from_audit_id,
        audit_pairs.to_audit_id,
        before.modality,
        before.probe_rows = after.probe_rows
            and before.rows_hash = after.rows_hash
            and before.rows_hash_2 = after.rows_hash_2 as same_probe_rows
    from audit_pairs
    inner join fingerprints as before on before.audit_id = audit_pairs.from_audit_id
    inner join fingerprints as after on after.audit_id = audit_pairs.to_audit_id and after.modality = before.modality
),

same_row_sides as (
    -- pairs that probed the same rows: each audit's own associations are the common rows' ones
    select pair_modalities.from_audit_id, pair_modalities.to_audit_id, 'before' as side, associations.* exclude (audit_id)
    from pair_modalities
    inner join associations
        on associations.audit_id = pair_modalities.from_audit_id and associations.modality = pair_modalities.modality
    where pair_modalities.same_probe_rows
    union all
    select pair_modalities.from_audit_id, pair_modalities.to_audit_id, 'after' as side, associations.* exclude (audit_id)
    from pair_modalities
    inner join associations
        on associations.audit_id = pair_modalities.to_audit_id and associations.modality = pair_modalities.modality
    where pair_modalities.same_probe_rows
),

common_rows as (
    -- pairs that probed different rows: the rows both audits probed
    select pair_modalities.from_audit_id, pair_modalities.to_audit_id, {{ qualified('before', probe_row_key) }}
    from pair_modalities
    inner join probe_rows as before
        on before.audit_id = pair_modalities.from_audit_id and before.modality = pair_modalities.modality
    inner join probe_rows as after
        on after.audit_id = pair_modalities.to_audit_id and {{ join_on('after', 'before', probe_row_key) }}
    where not pair_modalities.same_probe_rows
),

common_words as (
    -- each side's word occurrences on the common rows
    select common_rows.from_audit_id, common_rows.to_audit_id, 'before' as side,
           words.modality, words.setting, words.descriptor, words.word, words.occurrences
    from common_rows
    inner join probe_row_words as words
        on words.audit_id = common_rows.from_audit_id and {{ join_on('words', 'common_rows', probe_row_key) }}
    where words.word is not null
    union all
    select common_rows.from_audit_id, common_rows.to_audit_id, 'after' as side,
           words.modality, words.setting, words.descriptor, words.word, words.occurrences
    from common_rows
    inner join probe_row_words as words
        on words.audit_id = common_rows.to_audit_id and {{ join_on('words', 'common_rows', probe_row_key) }}
    where words.word is not null
),

recounted_tf as (
    -- tf(d, w) on the common rows
    select {{ side_setting | join(', ') }}, descriptor, word, cast(sum(occurrences) as bigint) as tf
    from common_words
    group by all
),

recounted as (
    -- the counts of int_association_counts, within one side of a pair instead of one audit:
    -- document length, the word's total and df, N (descriptors) and the grand total
    select
        *,
        cast(sum(tf) over (partition by {{ side_setting | join(', ') }}, descriptor) as bigint) as doc_length,
        cast(sum(tf) over (partition by {{ side_setting | join(', ') }}, word) as bigint) as word_total,
        count(*) over (partition by {{ side_setting | join(', ') }}, word) as df,
        count(distinct descriptor) over (partition by {{ side_setting | join(', ') }}) as n_descriptors,
        cast(sum(tf) over (partition by {{ side_setting | join(', ') }}) as bigint) as grand_total
    from recounted_tf
),

recounted_tests as (
    -- the within-audit statistics of fct_associations: tf-idf and the one-sided Fisher test of
    -- [[tf, doc_length - tf], [word_total - tf, grand_total - doc_length - word_total + tf]]
    select
        *,
        tf * ln(cast(n_descriptors as double) / df) as tfidf,
        fisher_greater(tf, doc_length - tf, word_total - tf, grand_total - doc_length - word_total + tf) as fisher_p,
        count(*) over (partition by {{ side_setting | join(', ') }}) as n_tests
    from recounted
),

recounted_ranked as (
    select
        *,
        row_number() over (partition by {{ side_setting | join(', ') }} order by fisher_p, descriptor, word) as p_rank
    from recounted_tests
),

recounted_adjusted as (
    -- Benjamini-Hochberg within the side's (modality, setting), as fct_associations within the audit's
    select
        *,
        {{ bh_q_value('fisher_p', 'n_tests', 'p_rank', side_setting) }} as fisher_q
    from recounted_ranked
),

descriptor_dimensions as (
    -- every bias dimension of a descriptor, from the audit's own associations
    select audit_id, {{ document_in_setting | join(', ') }}, any_value(bias_dimensions) as bias_dimensions
    from associations
    group by all
),

recounted_sides as (
    select
        r.from_audit_id,
        r.to_audit_id,
        r.side,
        {{ qualified('r', association_in_setting) }},
        dims.bias_dimensions,
        r.tf,
        r.tfidf,
        r.fisher_q,
        r.fisher_q < {{ var('significance_level') }} as is_significant
    from recounted_adjusted as r
    left join descriptor_dimensions as dims
        on dims.audit_id = case r.side when 'before' then r.from_audit_id else r.to_audit_id end
        and {{ join_on('dims', 'r', document_in_setting) }}
),

sides as (
    select * from same_row_sides
    union all by name
    select * from recounted_sides
),

documents as (
    -- length of each descriptor's document on the common rows = the sum of its words' tf
    -- (a row for every word with tf > 0 on that side, so this is exact)
    select from_audit_id, to_audit_id, side, {{ document_in_setting | join(', ') }}, cast(sum(tf) as bigint) as doc_length
    from sides
    group by all
),

before as (
    select * exclude (side) from sides where side = 'before'
),

after as (
    select * exclude (side) from sides where side = 'after'
),

scores as (
    select audit_id, modality, setting, descriptor, word, bias_level
    from {{ ref('fct_association_scores') }}
),

compared as (
    select
        coalesce(after.from_audit_id, before.from_audit_id) as from_audit_id,
        coalesce(after.to_audit_id, before.to_audit_id) as to_audit_id,
        coalesce(after.modality, before.modality) as modality,
        coalesce(after.setting, before.setting) as setting,
        coalesce(after.descriptor, before.descriptor) as descriptor,
        coalesce(after.word, before.word) as word,
        coalesce(after.bias_dimensions, before.bias_dimensions) as bias_dimensions,
        before.tf as tf_before,
        after.tf as tf_after,
        before.tfidf as tfidf_before,
        after.tfidf as tfidf_after,
        before.fisher_q as fisher_q_before,
        after.fisher_q as fisher_q_after,
        coalesce(before.is_significant, false) as significant_before,
        coalesce(after.is_significant, false) as significant_after
    from before
    full outer join after
        on {{ join_on('before', 'after', ['from_audit_id', 'to_audit_id'] + association_in_setting) }}
),

listed as (
    -- the associations significant in at least one of the two audits, with the length of the
    -- descriptor's document in each audit (0 when the descriptor has no word there)
    select
        compared.*,
        coalesce(documents_before.doc_length, 0) as doc_length_before,
        coalesce(documents_after.doc_length, 0) as doc_length_after
    from compared
    left join documents as documents_before
        on  documents_before.side = 'before'
        and {{ join_on('documents_before', 'compared', ['from_audit_id', 'to_audit_id'] + document_in_setting) }}
    left join documents as documents_after
        on  documents_after.side = 'after'
        and {{ join_on('documents_after', 'compared', ['from_audit_id', 'to_audit_id'] + document_in_setting) }}
    where compared.significant_before or compared.significant_after
),

tested as (
    -- two-sided Fisher's exact test of the 2x2 table
    -- [[tf_before, doc_length_before - tf_before], [tf_after, doc_length_after - tf_after]]
    -- (UDF fisher_two_sided = scipy.stats.fisher_exact(..., alternative="two-sided"))
    select
        *,
        fisher_two_sided(
            coalesce(tf_before, 0),
            doc_length_before - coalesce(tf_before, 0),
            coalesce(tf_after, 0),
            doc_length_after - coalesce(tf_after, 0)
        ) as change_p,
        count(*) over change_family as change_tests
    from listed
    window change_family as (partition by from_audit_id, to_audit_id, modality, setting)
),

ranked as (
    select
        *,
        row_number() over (
            partition by from_audit_id, to_audit_id, modality, setting
            order by change_p, descriptor, word
        ) as change_rank
    from tested
),

adjusted as (
    -- Benjamini-Hochberg within (from, to, modality, setting): p * m / rank, running minimum
    -- from the largest rank down, capped at 1 (= scipy.stats.false_discovery_control)
    select
        *,
        {{ bh_q_value('change_p', 'change_tests', 'change_rank', ['from_audit_id', 'to_audit_id', 'modality', 'setting']) }} as change_q
    from ranked
),

classified as (
    -- change types (doc block `change_type`): the change test decides whether anything
    -- changed; the significance flags and the direction of the word's share say how
    select
        *,
        change_q < {{ var('significance_level') }} as is_significant_change,
        case
            when not (change_q < {{ var('significance_level') }}) then 'unchanged'
            when significant_after and not significant_before then 'new'
            when significant_before and not significant_after then 'gone'
            when cast(coalesce(tf_after, 0) as double) * doc_length_before
                 > cast(coalesce(tf_before, 0) as double) * doc_length_after then 'strengthened'
            else 'weakened'
        end as change_type
    from adjusted
),

final as (
    select
        audit_pairs.target,
        classified.from_audit_id,
        classified.to_audit_id,
        audit_pairs.from_model_version,
        audit_pairs.to_model_version,
        audit_pairs.is_previous,
        classified.modality,
        classified.setting,
        classified.descriptor,
        classified.word,
        classified.change_type,
        classified.tf_before,
        classified.tf_after,
        classified.tfidf_before,
        classified.tfidf_after,
        coalesce(classified.tfidf_after, 0) - coalesce(classified.tfidf_before, 0) as tfidf_change,
        classified.fisher_q_before,
        classified.fisher_q_after,
        classified.doc_length_before,
        classified.doc_length_after,
        classified.change_p,
        classified.change_q,
        classified.is_significant_change,
        classified.significant_before,
        classified.significant_after,
        scores_before.bias_level as bias_level_before,
        scores_after.bias_level as bias_level_after,
        -- every bias dimension of the descriptor (the later audit's list, else the earlier's)
        classified.bias_dimensions,
        -- (appended: a reader selecting the columns above by position is unaffected)
        classified.significant_before <> classified.significant_after as significance_flipped
    from classified
    inner join audit_pairs
        on  classified.from_audit_id = audit_pairs.from_audit_id
        and classified.to_audit_id = audit_pairs.to_audit_id
    left join scores as scores_before
        on scores_before.audit_id = classified.from_audit_id and {{ join_on('scores_before', 'classified', association_in_setting) }}
    left join scores as scores_after
        on scores_after.audit_id = classified.to_audit_id and {{ join_on('scores_after', 'classified', association_in_setting) }}
)

select * from final

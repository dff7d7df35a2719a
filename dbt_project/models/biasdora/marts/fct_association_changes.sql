{#-
    PUBLIC CONTRACT: how each association changed between two finished audits of the same
    target (ingestion/registry.py), for every ordered pair (earlier = from, later = to);
    `is_previous` marks the pairs of consecutive audits (each audit vs the previous one).
    Keys: (from_audit_id, to_audit_id, modality, setting, descriptor, word). Only
    associations significant (Fisher BH q < 0.05) in at least one of the two audits are
    listed; change types are defined in the doc block `change_type`.

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

with

audits as (
    -- kind_seq: the audit's position among the finished audits of its target, family and
    -- modality; only audits of one kind are compared (a T2T audit is not a VLStereoSet one)
    select
        *,
        row_number() over (partition by target, family, modality order by audit_seq) as kind_seq
    from {{ ref('dim_audits') }}
    where status = 'finished' and audit_seq is not null
),

associations as (
    -- the columns compared (fct_associations holds every audit's rows, also archived ones)
    select audit_id, modality, setting, descriptor, word, bias_dimensions, tf, tfidf, fisher_q, is_significant
    from {{ ref('fct_associations') }}
),

documents as (
    -- length of each descriptor's document = the sum of its words' tf
    -- (fct_associations has a row for every word with tf > 0, so this is exact)
    select audit_id, modality, setting, descriptor, cast(sum(tf) as bigint) as doc_length
    from associations
    group by audit_id, modality, setting, descriptor
),

scores as (
    select audit_id, modality, setting, descriptor, word, bias_level
    from {{ ref('fct_association_scores') }}
),

audit_pairs as (
    -- every earlier finished audit of the same target, family and modality
    select
        later.target,
        earlier.audit_id as from_audit_id,
        later.audit_id as to_audit_id,
        earlier.model_version as from_model_version,
        later.model_version as to_model_version,
        later.kind_seq - earlier.kind_seq = 1 as is_previous
    from audits as later
    inner join audits as earlier
        on  earlier.target = later.target
        and earlier.family = later.family
        and earlier.modality = later.modality
        and earlier.kind_seq < later.kind_seq
),

before as (
    -- the associations of each pair's earlier audit
    select audit_pairs.from_audit_id, audit_pairs.to_audit_id, associations.* exclude (audit_id)
    from audit_pairs
    inner join associations on associations.audit_id = audit_pairs.from_audit_id
),

after as (
    -- the associations of each pair's later audit
    select audit_pairs.from_audit_id, audit_pairs.to_audit_id, associations.* exclude (audit_id)
    from audit_pairs
    inner join associations on associations.audit_id = audit_pairs.to_audit_id
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
    -- descriptor's document in each audit (0 when the descriptor has no document there)
    select
        compared.*,
        coalesce(documents_before.doc_length, 0) as doc_length_before,
        coalesce(documents_after.doc_length, 0) as doc_length_after
    from compared
    left join documents as documents_before
        on documents_before.audit_id = compared.from_audit_id and {{ join_on('documents_before', 'compared', document_in_setting) }}
    left join documents as documents_after
        on documents_after.audit_id = compared.to_audit_id and {{ join_on('documents_after', 'compared', document_in_setting) }}
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
        classified.bias_dimensions
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

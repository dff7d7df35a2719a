{%- set watermark_columns = ['counted_inputs_landed_at'] %}
{%- set rebuild_by_audit = is_incremental() and has_columns(this, watermark_columns) %}
{#- Incremental, not the intermediate view: recounts only audits with new inputs (macros/incremental_audits.sql). -#}
{{ config_incremental_by_audit('counted_input_watermarks()', watermark_columns) }}

{#-
    Co-occurrence counts behind every association statistic (docs/method.md#3-associations), one row
    per (audit, modality, setting, descriptor, word) with tf > 0. Everything is counted
    within one (audit, modality, setting). bias_dimensions lists every bias dimension of the
    descriptor (the bridge int_descriptor_dimensions); a descriptor counts in each of them.

    Incremental per audit (macros/incremental_audits.sql), like the marts: a build
    counts only the audits whose staged inputs changed since they were counted here
    (watermark `counted_inputs_landed_at`), so a new audit costs its own rows, not the history.
-#}

{%- set word_key = setting_key() + ['word'] %}

with

{{ watermark_ctes(counted_input_watermarks(), watermark_columns, rebuild_by_audit) }}

document_words as (
    select * from {{ ref('int_document_words') }}
    {{ only_audits_to_rebuild(rebuild_by_audit) }}
),

term_frequencies as (
    -- tf(d,w): occurrences of w in d's document
    select
        {{ association_key() | join(', ') }},
        count(*) as tf
    from document_words
    group by {{ association_key() | join(', ') }}
),

documents as (
    -- one row per non-empty document: its length
    -- (from the tf rows, not the ~2.8M word rows again: sum of tf = count of words)
    select
        {{ document_key() | join(', ') }},
        cast(sum(tf) as bigint) as doc_length
    from term_frequencies
    group by {{ document_key() | join(', ') }}
),

words as (
    -- df(w): documents containing w; word_total: occurrences of w in all documents
    select
        {{ word_key | join(', ') }},
        count(distinct descriptor) as df,
        cast(sum(tf) as bigint) as word_total
    from term_frequencies
    group by {{ word_key | join(', ') }}
),

paper_words as (
    -- the paper's df(w) (docs/method.md#3a-paper-statistics): paper documents (a probe row in one run; one
    -- description) containing w
    select
        {{ word_key | join(', ') }},
        count(distinct document_id) as paper_df
    from document_words
    group by {{ word_key | join(', ') }}
),

paper_documents as (
    select * from {{ ref('int_paper_documents') }}
),

descriptor_dimensions as (
    -- every bias dimension of the descriptor (the bridge int_descriptor_dimensions)
    select
        {{ document_key() | join(', ') }},
        list(distinct bias_dimension order by bias_dimension) as bias_dimensions
    from {{ ref('int_descriptor_dimensions') }}
    group by {{ document_key() | join(', ') }}
),

settings as (
    -- N: descriptors (non-empty documents); grand_total: all words
    select
        {{ setting_key() | join(', ') }},
        count(*) as n_descriptors,
        cast(sum(doc_length) as bigint) as grand_total
    from documents
    group by {{ setting_key() | join(', ') }}
),

final as (
    select
        {{ qualified('term_frequencies', association_key()) }},
        term_frequencies.tf,
        documents.doc_length,
        words.word_total,
        words.df,
        settings.n_descriptors,
        settings.grand_total,
        -- the bridge lists every document's own dimension, so it misses only a document
        -- whose probe rows carry none: [null] there, as every descriptor has a list
        coalesce(descriptor_dimensions.bias_dimensions, [cast(null as varchar)]) as bias_dimensions,
        paper_words.paper_df,
        paper_documents.n_paper_documents,
        watermarks.counted_inputs_landed_at
    from term_frequencies
    inner join documents on {{ join_on('term_frequencies', 'documents', document_key()) }}
    inner join words on {{ join_on('term_frequencies', 'words', word_key) }}
    inner join settings on {{ join_on('term_frequencies', 'settings', setting_key()) }}
    left join paper_words on {{ join_on('term_frequencies', 'paper_words', word_key) }}
    left join paper_documents on {{ join_on('term_frequencies', 'paper_documents', setting_key()) }}
    left join descriptor_dimensions on {{ join_on('term_frequencies', 'descriptor_dimensions', document_key()) }}
    left join watermarks on term_frequencies.audit_id = watermarks.audit_id
)

{{ select_with_build_stamp('final', false) }}

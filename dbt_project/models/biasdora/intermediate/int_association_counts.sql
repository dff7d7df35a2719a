{%- set watermark_columns = ['counted_inputs_landed_at'] %}
{%- set rebuild_by_audit = is_incremental() and has_columns(this, watermark_columns) %}
{%- set watermarks_sql = "select audit_id, inputs_landed_at as counted_inputs_landed_at from (" ~ association_input_watermarks() ~ ") as w" %}
{#- Incremental, not the intermediate view: recounts only audits with new inputs (macros/incremental_audits.sql). -#}
{{ config(
    materialized='incremental',
    incremental_strategy='delete+insert',
    unique_key='audit_id',
    on_schema_change='append_new_columns',
    post_hook="{{ delete_outdated_audit_rows(\"select audit_id, inputs_landed_at as counted_inputs_landed_at from (\" ~ association_input_watermarks() ~ \") as w\", ['counted_inputs_landed_at']) }}",
) }}

{#-
    Co-occurrence counts behind every association statistic (docs/method.md#3-associations), one row
    per (audit, modality, setting, descriptor, word) with tf > 0. Everything is counted
    within one (audit, modality, setting).

    Incremental per audit (macros/incremental_audits.sql), like the marts: a build
    counts only the audits whose staged inputs changed since they were counted here
    (watermark `counted_inputs_landed_at`), so a new audit costs its own rows, not the history.
-#}

with

watermarks as (
    {{ watermarks_sql }}
),
{%- if rebuild_by_audit %}

audits_to_rebuild as (
    {{ audits_to_rebuild('watermarks', watermark_columns) }}
),
{%- endif %}

document_words as (
    select * from {{ ref('int_document_words') }}
    {%- if rebuild_by_audit %}
    where audit_id in (select audit_id from audits_to_rebuild)
    {%- endif %}
),

term_frequencies as (
    -- tf(d,w): occurrences of w in d's document
    select
        audit_id,
        model_id,
        model_version,
        modality,
        setting,
        descriptor,
        word,
        count(*) as tf,
        min(bias_dimension) as min_bias_dimension
    from document_words
    group by audit_id, model_id, model_version, modality, setting, descriptor, word
),

documents as (
    -- one row per non-empty document: its length and bias dimension
    -- (from the tf rows, not the ~2.8M word rows again: sum of tf = count of words)
    select
        audit_id,
        modality,
        setting,
        descriptor,
        min(min_bias_dimension) as bias_dimension,
        cast(sum(tf) as bigint) as doc_length
    from term_frequencies
    group by audit_id, modality, setting, descriptor
),

words as (
    -- df(w): documents containing w; word_total: occurrences of w in all documents
    select
        audit_id,
        modality,
        setting,
        word,
        count(distinct descriptor) as df,
        cast(sum(tf) as bigint) as word_total
    from term_frequencies
    group by audit_id, modality, setting, word
),

paper_words as (
    -- the paper's df(w) (docs/method.md#3a-paper-statistics): paper documents (a probe row in one run; one
    -- description) containing w
    select
        audit_id,
        modality,
        setting,
        word,
        count(distinct document_id) as paper_df
    from document_words
    group by audit_id, modality, setting, word
),

paper_documents as (
    select * from {{ ref('int_paper_documents') }}
),

descriptor_dimensions as (
    -- every bias dimension of the descriptor (the bridge int_descriptor_dimensions)
    select
        audit_id,
        modality,
        setting,
        descriptor,
        list(distinct bias_dimension order by bias_dimension) as bias_dimensions
    from {{ ref('int_descriptor_dimensions') }}
    group by audit_id, modality, setting, descriptor
),

settings as (
    -- N: descriptors (non-empty documents); grand_total: all words
    select
        audit_id,
        modality,
        setting,
        count(*) as n_descriptors,
        cast(sum(doc_length) as bigint) as grand_total
    from documents
    group by audit_id, modality, setting
),

final as (
    select
        term_frequencies.audit_id,
        term_frequencies.model_id,
        term_frequencies.model_version,
        term_frequencies.modality,
        term_frequencies.setting,
        term_frequencies.descriptor,
        coalesce(descriptor_dimensions.bias_dimensions[1], documents.bias_dimension) as bias_dimension,
        term_frequencies.word,
        term_frequencies.tf,
        documents.doc_length,
        words.word_total,
        words.df,
        settings.n_descriptors,
        settings.grand_total,
        coalesce(descriptor_dimensions.bias_dimensions, [documents.bias_dimension]) as bias_dimensions,
        paper_words.paper_df,
        paper_documents.n_paper_documents,
        watermarks.counted_inputs_landed_at
    from term_frequencies
    inner join documents
        on  term_frequencies.audit_id = documents.audit_id
        and term_frequencies.modality = documents.modality
        and term_frequencies.setting = documents.setting
        and term_frequencies.descriptor = documents.descriptor
    inner join words
        on  term_frequencies.audit_id = words.audit_id
        and term_frequencies.modality = words.modality
        and term_frequencies.setting = words.setting
        and term_frequencies.word = words.word
    inner join settings
        on  term_frequencies.audit_id = settings.audit_id
        and term_frequencies.modality = settings.modality
        and term_frequencies.setting = settings.setting
    left join paper_words
        on  term_frequencies.audit_id = paper_words.audit_id
        and term_frequencies.modality = paper_words.modality
        and term_frequencies.setting = paper_words.setting
        and term_frequencies.word = paper_words.word
    left join paper_documents
        on  term_frequencies.audit_id = paper_documents.audit_id
        and term_frequencies.modality = paper_documents.modality
        and term_frequencies.setting = paper_documents.setting
    left join descriptor_dimensions
        on  term_frequencies.audit_id = descriptor_dimensions.audit_id
        and term_frequencies.modality = descriptor_dimensions.modality
        and term_frequencies.setting = descriptor_dimensions.setting
        and term_frequencies.descriptor = descriptor_dimensions.descriptor
    left join watermarks
        on term_frequencies.audit_id = watermarks.audit_id
)

{{ select_with_build_stamp('final', false) }}

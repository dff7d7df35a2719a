{#-
    Every probe row of every BiasDora audit, with the document words it gave: what two audits
    are compared on (`dora diff` compares two audits on the probe rows both probed:
    fct_association_changes, fct_audit_comparisons).

    A probe row is one prompt slot of the audit's plan, whether or not its answer parsed:
    T2T the completion key (setting, descriptor, descriptor_row, letter, run) of
    stg_t2t_completions; T2I / I2T the description key (setting, descriptor, image_setting,
    descriptor_row, image_index; modality from the description kind) of stg_i2t_descriptions.
    `probe_row` is that key within (modality, setting, descriptor_key); two audits probed the
    same row when (modality, setting, descriptor_key, probe_row) are equal.

    One row per (probe row, word) with the word's occurrences in the row's document words
    (int_document_words, the one definition of a document word: the T2T row's `sample_id` is
    `<descriptor_row>-<letter>-<run>`, a description's its `description_id`); a row that gave
    no word (not parsed, an empty word, every token dropped) is one row with word null and 0
    occurrences, so it still counts as probed.

    Incremental per audit, like int_association_counts (macros/incremental_audits.sql): an
    audit's rows are rebuilt only when its inputs landed since, and stay when its landing
    shards are archived, so archived audits can still be compared.
-#}

{%- set watermark_columns = ['inputs_landed_at'] %}
{%- set rebuild_by_audit = is_incremental() and has_columns(this, model.columns.keys() | list) %}

{#- Incremental, not the intermediate view: rebuilds only audits with new inputs, keeps archived ones (macros/incremental_audits.sql). -#}
{{ config_incremental_by_audit('association_input_watermarks()', watermark_columns) }}

with

{{ watermark_ctes(association_input_watermarks(), watermark_columns, rebuild_by_audit) }}

t2t_rows as (
    select
        audit_id,
        't2t' as modality,
        setting,
        descriptor as descriptor_key,
        -- the same string as int_document_words.sample_id of the completion's word
        cast(descriptor_row as varchar) || '-' || letter || '-' || cast(run as varchar) as probe_row,
        letter,
        run,
        parse_status = 'ok' as is_parsed,
        cast(null as varchar) as description_id
    from {{ ref('stg_t2t_completions') }}
    {{ only_audits_to_rebuild(rebuild_by_audit) }}
),

description_rows as (
    select
        audit_id,
        case description_kind when 'objective' then 't2i' when 'subjective' then 'i2t' end as modality,
        setting,
        descriptor as descriptor_key,
        image_setting || '-' || cast(descriptor_row as varchar) || '-' || cast(image_index as varchar) as probe_row,
        cast(null as varchar) as letter,
        cast(null as integer) as run,
        status in ('ok', 'truncated') as is_parsed,
        description_id
    from {{ ref('stg_i2t_descriptions') }}
    {{ only_audits_to_rebuild(rebuild_by_audit) }}
),

document_words as (
    select audit_id, modality, setting, descriptor, descriptor_key, sample_id, word, count(*) as occurrences
    from {{ ref('int_document_words') }}
    {{ only_audits_to_rebuild(rebuild_by_audit) }}
    group by all
),

t2t_words as (
    select
        r.audit_id, r.modality, r.setting, r.descriptor_key, r.probe_row, r.letter, r.run, r.is_parsed,
        coalesce(w.descriptor, r.descriptor_key) as descriptor,
        w.word,
        coalesce(w.occurrences, 0) as occurrences
    from t2t_rows as r
    left join document_words as w
        on  w.audit_id = r.audit_id and w.modality = 't2t' and w.setting = r.setting
        and w.descriptor = r.descriptor_key and w.sample_id = r.probe_row
),

description_words as (
    -- the document descriptor of a plural image target differs from its key
    -- ("old people" / "old person"): it comes with the words
    select
        r.audit_id, r.modality, r.setting, r.descriptor_key, r.probe_row, r.letter, r.run, r.is_parsed,
        coalesce(w.descriptor, r.descriptor_key) as descriptor,
        w.word,
        coalesce(w.occurrences, 0) as occurrences
    from description_rows as r
    left join document_words as w
        on w.audit_id = r.audit_id and w.modality = r.modality and w.sample_id = r.description_id
),

final as (
    select rows.*, watermarks.inputs_landed_at
    from (
        select * from t2t_words
        union all
        select * from description_words
    ) as rows
    left join watermarks on rows.audit_id = watermarks.audit_id
)

select * from final

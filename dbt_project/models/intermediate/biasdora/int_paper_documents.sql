{#-
    N of the paper's own idf (docs/method.md#3a-paper-statistics; the BiasDora released code), one row per
    (audit, modality, setting):
    - T2T: a paper document is one probe row in one run with its letter answers; the code
      divides by rows x 26 answer columns, so n_paper_documents = (probe rows x runs landed,
      whatever their parse status) x letters probed (26 for a..z);
    - descriptions (T2I / I2T): a paper document is one description (status ok / truncated).
-#}

with

t2t as (
    select
        audit_id,
        't2t' as modality,
        setting,
        count(distinct (descriptor, descriptor_row, run)) as probe_documents,
        count(distinct letter) as answers_per_document
    from {{ ref('stg_t2t_completions') }}
    group by audit_id, setting
),

descriptions as (
    select
        audit_id,
        case description_kind when 'objective' then 't2i' when 'subjective' then 'i2t' end as modality,
        setting,
        count(*) as probe_documents,
        1 as answers_per_document
    from {{ ref('stg_i2t_descriptions') }}
    where status in ('ok', 'truncated')
    group by all
),

final as (
    select audit_id, modality, setting, probe_documents, answers_per_document,
           cast(probe_documents * answers_per_document as bigint) as n_paper_documents
    from t2t
    union all
    select audit_id, modality, setting, probe_documents, answers_per_document,
           cast(probe_documents * answers_per_document as bigint) as n_paper_documents
    from descriptions
)

select * from final

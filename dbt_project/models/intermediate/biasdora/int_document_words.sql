{#-
    The ONE definition of a co-occurrence document word (docs/method.md#3-associations): one row per
    word occurrence in the document of one descriptor in one (audit, modality, setting).
    One CTE per modality; T2I / I2T description words (tokenised, lemmatised, stop words
    dropped: ingestion/biasdora/description_words.py) are the CTE description_document_words.
-#}

with

t2t_completions as (
    select * from {{ ref('stg_t2t_completions') }}
),

t2t_words as (
    select
        audit_id,
        model_id,
        model_version,
        't2t' as modality,
        setting,
        descriptor,
        descriptor as descriptor_key,
        bias_dimension,
        -- the paper's document (docs/method.md#3a-paper-statistics): one probe row in one run
        descriptor || '|' || cast(descriptor_row as varchar) || '|' || cast(run as varchar) as document_id,
        lower(trim(word)) as word,
        -- (drill-down, fct_association_samples): the completion the word came from
        cast(descriptor_row as varchar) || '-' || letter || '-' || cast(run as varchar) as sample_id
    from t2t_completions
    where parse_status = 'ok'
      and nullif(trim(word), '') is not null
),

i2t_descriptions as (
    select * from {{ ref('stg_i2t_descriptions') }}
),

description_words as (
    select * from {{ ref('stg_description_words') }}
),

plural_targets as (
    -- the plural image target's name: the plural T2I list's phrase ("old people"); a phrase equal
    -- to the key (invariant plurals: "police") gets " (plural)" so the targets stay apart
    select
        descriptor,
        case when min(lower(phrase)) = descriptor then descriptor || ' (plural)' else min(lower(phrase)) end as target
    from {{ ref('stg_descriptor_rows') }}
    where list_modality = 't2i' and setting = 'plural'
    group by descriptor
),

description_document_words as (
    -- T2I / I2T (BiasDora Section 3): kept words (lemmas; stop words, punctuation, numbers and,
    -- as an option, the descriptor's own words dropped) of the ok / truncated descriptions.
    -- Objective descriptions give modality 't2i', attributed to the image model; subjective
    -- ones 'i2t', attributed to the describing model. Images of the singular and the plural
    -- T2I setting are SEPARATE targets (docs/method.md#3a-paper-statistics: "old person" / "old people"); dbt var
    -- pool_image_settings: true pools them per descriptor key instead.
    select
        i2t_descriptions.audit_id,
        case i2t_descriptions.description_kind
            when 'objective' then i2t_descriptions.t2i_model_id
            when 'subjective' then i2t_descriptions.model_id
        end as model_id,
        case i2t_descriptions.description_kind
            when 'objective' then i2t_descriptions.t2i_model_version
            when 'subjective' then i2t_descriptions.model_version
        end as model_version,
        case i2t_descriptions.description_kind
            when 'objective' then 't2i'
            when 'subjective' then 'i2t'
        end as modality,
        i2t_descriptions.setting,
        {%- if var('pool_image_settings', false) %}
        i2t_descriptions.descriptor,
        {%- else %}
        case
            when i2t_descriptions.image_setting = 'plural'
                then coalesce(plural_targets.target, i2t_descriptions.descriptor || ' (plural)')
            else i2t_descriptions.descriptor
        end as descriptor,
        {%- endif %}
        i2t_descriptions.descriptor as descriptor_key,
        i2t_descriptions.bias_dimension,
        -- the paper's document (docs/method.md#3a-paper-statistics): one description
        i2t_descriptions.description_id as document_id,
        description_words.word,
        i2t_descriptions.image_audit_id,
        i2t_descriptions.description_id as sample_id  -- (drill-down)
    from description_words
    inner join i2t_descriptions
        on description_words.description_id = i2t_descriptions.description_id
    left join plural_targets
        on plural_targets.descriptor = i2t_descriptions.descriptor
    where i2t_descriptions.status in ('ok', 'truncated')
      and description_words.drop_reason is null
      and nullif(trim(description_words.word), '') is not null
),

kept_description_words as (
    -- dbt var exclude_objective_pairs (default false): drop from the subjective
    -- (I2T) documents the (target, word) pairs the objective descriptions of the same images
    -- already contain, so I2T keeps only what the describer added
    select audit_id, model_id, model_version, modality, setting, descriptor, descriptor_key, bias_dimension,
           document_id, word, sample_id
    from description_document_words as d
    {%- if var('exclude_objective_pairs', false) %}
    where not (
        d.modality = 'i2t'
        and exists (
            select 1 from description_document_words as o
            where o.modality = 't2i'
              and o.image_audit_id = d.image_audit_id
              and o.descriptor = d.descriptor
              and o.word = d.word
        )
    )
    {%- endif %}
),

final as (
    select * from t2t_words
    union all by name
    select * from kept_description_words
)

select * from final

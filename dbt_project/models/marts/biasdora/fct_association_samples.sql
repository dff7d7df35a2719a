{#-
    (drill-down): the samples behind every significant association. One row per
    (significant association of fct_associations, sample that produced it): for T2T the
    completion (prompt, raw output, parsed word, parse status, seed, letter, run), for T2I /
    I2T the description (prompt, raw output, status, seed) with its image (path, sha256, the
    T2I prompt and seed). `occurrences` = how often the word occurs in that sample's kept
    words (1 for a T2T completion), so the occurrences of an association's rows add up to its
    tf: the rows come from int_document_words, the one definition of a document word.
    Audits whose landing shards were archived keep their fct_associations rows but have no
    samples here (the staging tables read the landing zone).
-#}

with

significant as (
    select audit_id, modality, setting, descriptor, word, tf, fisher_q
    from {{ ref('fct_associations') }}
    where is_significant
),

occurrences as (
    select
        {{ qualified('document_words', association_key()) }},
        document_words.sample_id,
        any_value(significant.tf) as tf,
        any_value(significant.fisher_q) as fisher_q,
        count(*) as occurrences
    from {{ ref('int_document_words') }} as document_words
    inner join significant on {{ join_on('document_words', 'significant', document_key() + ['word']) }}
    group by all
),

completions as (
    select *, cast(descriptor_row as varchar) || '-' || letter || '-' || cast(run as varchar) as sample_id
    from {{ ref('stg_t2t_completions') }}
),

descriptions as (
    select * from {{ ref('stg_i2t_descriptions') }}
),

images as (
    -- one row per image file of an audit (the same bytes drawn twice would repeat samples)
    select audit_id, sha256, image_path, prompt, seed
    from {{ ref('stg_t2i_images') }}
    where sha256 is not null
    qualify row_number() over (partition by audit_id, sha256 order by image_path) = 1
),

t2t_samples as (
    select
        occurrences.*,
        'completion' as sample_kind,
        completions.prompt,
        completions.raw_output,
        completions.word as parsed_word,
        completions.parse_status,
        completions.seed,
        completions.prompt_style,
        completions.letter,
        completions.run,
        cast(null as varchar) as image_path,
        cast(null as varchar) as image_sha256,
        cast(null as varchar) as image_prompt,
        cast(null as bigint) as image_seed
    from occurrences
    inner join completions
        on {{ join_on('occurrences', 'completions', audit_columns() + ['setting', 'descriptor', 'sample_id']) }}
    where occurrences.modality = 't2t'
),

description_samples as (
    select
        occurrences.*,
        'description' as sample_kind,
        descriptions.prompt,
        descriptions.raw_output,
        cast(null as varchar) as parsed_word,
        descriptions.status as parse_status,
        descriptions.seed,
        cast(null as varchar) as prompt_style,
        cast(null as varchar) as letter,
        cast(null as integer) as run,
        images.image_path,
        descriptions.image_sha256,
        images.prompt as image_prompt,
        images.seed as image_seed
    from occurrences
    inner join descriptions on occurrences.sample_id = descriptions.description_id
    left join images
        on  images.audit_id = descriptions.image_audit_id
        and images.sha256 = descriptions.image_sha256
    where occurrences.modality in ('t2i', 'i2t')
),

samples as (
    select * from t2t_samples
    union all by name
    select * from description_samples
),

final as (
    select
        audit_id, model_id, model_version, modality, setting, descriptor, word, tf, fisher_q,
        sample_kind, sample_id, occurrences, prompt, raw_output, parsed_word, parse_status, seed,
        prompt_style, letter, run, image_path, image_sha256, image_prompt, image_seed
    from samples
)

select * from final

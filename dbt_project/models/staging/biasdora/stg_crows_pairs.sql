with

source as (
    select * from {{ source('landing', 'crows_pairs') }}
),

renamed as (
    select
        pair_id,
        sent_more,
        sent_less,
        stereo_antistereo,
        bias_type,
        source_file,
        source_line
    from source
)

select * from renamed

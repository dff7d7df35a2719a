with

source as (
    select * from {{ source('landing', 'descriptors') }}
),

renamed as (
    select distinct
        descriptor,
        bias_dimension,
        source,
        surface,
        plural,
        pair_id
    from source
)

select * from renamed

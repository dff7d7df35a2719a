-- One row per (response, scorer, scorer version): the latest score wins.
with

source as (
    select * from {{ source('landing', 'counterfactual_toxicity') }}
),

renamed as (
    {{ latest_per_key('source', ['response_id', 'scorer', 'scorer_version'], ['scored_at desc']) }}
)

select * from renamed

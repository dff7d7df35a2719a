-- One row per (response, scorer, scorer version): the latest score wins.
with src as (
    select * from {{ source('landing', 'counterfactual_toxicity') }}
)
{{ latest_per_key('src', ['response_id', 'scorer', 'scorer_version'], ['scored_at desc']) }}

-- The competence lexicon and stop list (Howard et al. App. E.1), one row per (word, dimension,
-- direction): the landed snapshots repeat them, and the lexicon's name is not part of a word's
-- meaning, so duplicates across snapshots collapse.
with

source as (
    select * from {{ source('landing', 'counterfactual_lexicon') }}
),

renamed as (
    select distinct word, dimension, direction
    from source
)

select * from renamed

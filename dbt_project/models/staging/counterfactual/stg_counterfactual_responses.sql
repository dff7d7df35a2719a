-- One row per response key (audit, set, member, prompt, mitigation, run): the latest landed
-- row wins, so a retried `error` row is replaced by its retry (append-only landing).
-- The landing column `seed` holds the run's 0-based index and `generation_seed` the random
-- seed (ingestion/contracts/counterfactual.py): here `run` counts from 1, as T2T's runs do,
-- and `seed` is the random seed, the one meaning a staging `seed` has (docs/glossary.md).
with

source as (
    select * from {{ source('landing', 'counterfactual_responses') }}
),

landed_rows as (
    select * replace (run + 1 as run)
    from (select * rename (seed as run, generation_seed as seed) from source) as landed
),

renamed as (
    {{ latest_per_key('landed_rows', ['audit_id', 'set_id', 'a1', 'a2', 'prompt_label', 'mitigation', 'run'], ['generated_at desc', 'response_id']) }}
)

select * from renamed

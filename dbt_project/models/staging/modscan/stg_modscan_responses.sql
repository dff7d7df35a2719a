{#-
    One row per ModSCAN query key (audit, model, version, probe, attribute, scenario, instance,
    condition, prefix, query_unit). The landing table is append-only: an `error` row is retried
    and lands again, so the latest generated_at wins, an answered row before an error row.
    `answer_mode`: rows landed before the column existed were answered freely (null -> 'free').
    The landing column `sample` is the run (1-based, as landed), named `run` here
    (docs/glossary.md).
-#}

with

source as (
    -- sqlfluff's duckdb dialect does not parse `replace (...) rename (...)` together
    select * replace (coalesce(answer_mode, 'free') as answer_mode) rename (sample as run)  -- noqa: PRS
    from {{ source('landing', 'modscan_responses') }}
),

renamed as (
    {{ latest_per_key(
        'source',
        key=['audit_id', 'model_id', 'model_version', 'probe', 'attribute', 'scenario', 'instance', 'condition', 'prefix', 'query_unit'],
        order_by=["(status <> 'error') desc", 'generated_at desc nulls last', 'raw_output desc nulls last'],
    ) }}
)

select * from renamed

{#-
    Seed 000 Table 4 / Table 13 (docs/families/modscan.md#similarity): "the percentage of identical parsed outputs
    from each of the two models", over the queries both audits asked (same probe, attribute,
    scenario, instance, condition, prefix and query unit, e.g. the same face pair). The parsed
    output is the chosen group, or 'N/A' for any N/A answer ([UNDEFINED]: N/A = N/A counts as
    identical, the spec's default). One row per ordered pair of audits (a < b) and cell.
-#}

with

answers as (
    select audit_id, model_id, probe, attribute, scenario, instance, condition, prefix, query_unit,
        coalesce(chosen_group, 'N/A') as parsed_output
    from {{ ref('fct_modscan_responses') }}
    where is_answered
),

final as (
    select
        a.audit_id as audit_id_a,
        b.audit_id as audit_id_b,
        any_value(a.model_id) as model_id_a,
        any_value(b.model_id) as model_id_b,
        a.probe,
        a.attribute,
        a.scenario,
        a.condition,
        a.prefix,
        count(*) as n_shared_queries,
        100.0 * count(*) filter (where a.parsed_output = b.parsed_output) / count(*) as pct_identical
    from answers as a
    inner join answers as b
        on a.audit_id < b.audit_id and a.probe = b.probe and a.attribute = b.attribute and a.scenario = b.scenario
        and a.instance = b.instance and a.condition = b.condition and a.prefix = b.prefix and a.query_unit = b.query_unit
    group by a.audit_id, b.audit_id, a.probe, a.attribute, a.scenario, a.condition, a.prefix
)

select * from final

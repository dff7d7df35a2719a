{#- Shapes shared by the staging models of append-only landing tables (ingestion/landing.py). -#}


{% macro association_key() -%}
    {#-
        The key of one association, as a list of column names: audit_id, model_id,
        model_version, modality, setting, descriptor, word. It leads every score table's
        columns (ingestion/landing.py `_ASSOCIATION_KEY`) and keys `fct_associations` (with
        model_id / model_version functionally dependent on the audit).
    -#}
    {{ return(['audit_id', 'model_id', 'model_version', 'modality', 'setting', 'descriptor', 'word']) }}
{%- endmacro %}


{% macro latest_per_key(relation, key, order_by) -%}
    {#-
        SELECT of the rows of `relation` (a relation or CTE name) that win on their `key`
        (list of columns): the first in `order_by` (list of ORDER BY terms, the landing
        timestamp first, then deterministic tie-breakers). Append-only landing tables keep
        every retry of a row key; this keeps the one that counts, so re-landing is idempotent.
    -#}
    select *
    from {{ relation }}
    qualify row_number() over (
        partition by {{ key | join(', ') }}
        order by {{ order_by | join(', ') }}
    ) = 1
{%- endmacro %}

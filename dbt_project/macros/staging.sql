{#- Shapes shared by the staging models of append-only landing tables (ingestion/landing.py). -#}


{% macro association_key() -%}
    {#-
        The key of one association, as a list of column names: audit_id, model_id,
        model_version, modality, setting, descriptor, word. It leads every score table's
        columns (ingestion/landing.py `_ASSOCIATION_KEY`) and keys `fct_associations` (with
        model_id / model_version functionally dependent on the audit).
    -#}
    {{ return(audit_setting_columns() + ['descriptor', 'word']) }}
{%- endmacro %}


{% macro audit_setting_columns() -%}
    {#-
        The leading columns of every BiasDora row counted within one setting of one audit:
        audit_id, model_id, model_version, modality, setting (model_id / model_version are
        functionally dependent on the audit). The association key adds descriptor and word.
    -#}
    {{ return(audit_columns() + ['modality', 'setting']) }}
{%- endmacro %}


{% macro audit_columns() -%}
    {#-
        Who was audited, the columns every family's rows lead with: audit_id, model_id,
        model_version (ingestion/contracts/ SCHEMAS; the version is the one model_ref.py
        computes, so two audits of one model id compare across versions).
    -#}
    {{ return(['audit_id', 'model_id', 'model_version']) }}
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


{% macro setting_key() -%}
    {#-
        The columns of one BiasDora setting of an audit: audit_id, modality, setting. Every
        association statistic is counted within one of them (docs/method.md#3-associations).
    -#}
    {{ return(['audit_id', 'modality', 'setting']) }}
{%- endmacro %}


{% macro document_key() -%}
    {#- The key of one descriptor's document within a setting: setting_key() plus descriptor. -#}
    {{ return(setting_key() + ['descriptor']) }}
{%- endmacro %}


{% macro qualified(alias, columns) -%}
    {#-
        `alias.c1, alias.c2, ...` for the column names of `columns`: a key selected from one
        side of a join, written once where the key is defined (association_key(), ...).
    -#}
    {%- for column in columns %}{{ alias }}.{{ column }}{{ ', ' if not loop.last }}{% endfor -%}
{%- endmacro %}


{% macro join_on(left, right, columns) -%}
    {#-
        Join condition `left.c = right.c and ...` over the columns of `columns` (a key list):
        an explicit equi-join, so either side's columns stay addressable by their alias.
    -#}
    {%- for column in columns %}{{ 'and ' if not loop.first }}{{ left }}.{{ column }} = {{ right }}.{{ column }} {% endfor -%}
{%- endmacro %}


{% macro staged_association_scores(source_relation, score_columns, tie_breaker) -%}
    {#-
        The whole body of a staging model of an association score table (sentiment_scores,
        toxicity_scores; ingestion/contracts/ SCHEMAS): the association key, the scored
        `text`, the scorer and its version, the table's own `score_columns` (list),
        `scored_at` and `score_pool` (null = 'fisher', rows landed before pools existed); one
        row per (association, scorer, scorer_version), the latest scored_at winning, then
        `tie_breaker` (an ORDER BY term). Both tables land the same row shape from one scoring
        loop (models_inference/scoring/run.py), so they are staged by one definition.
    -#}
    with

    source as (
        select * from {{ source_relation }}
    ),

    landed_rows as (
        select
            {{ association_key() | join(', ') }},  -- the association key
            text,
            scorer,
            scorer_version,
            {{ score_columns | join(', ') }},
            scored_at,
            coalesce(score_pool, 'fisher') as score_pool  -- which pool was scored
        from source
    ),

    renamed as (
        {{ latest_per_key(
            'landed_rows',
            key=association_key() + ['scorer', 'scorer_version'],
            order_by=['scored_at desc nulls last', tie_breaker],
        ) }}
    )

    select * from renamed
{%- endmacro %}


{% macro probe_row_columns() -%}
    {#-
        The leading columns of a BiasDora probe's landed row (T2T completions, T2I images;
        ingestion/contracts/ SCHEMAS): who answered (audit_id, model_id, model_version,
        backend) and which row of the paper's lists it answers (setting, descriptor,
        bias_dimension, descriptor_row; rows landed before descriptor_row existed are row 1).
    -#}
    audit_id,
    model_id,
    model_version,
    backend,
    setting,
    descriptor,
    bias_dimension,
    coalesce(descriptor_row, 1) as descriptor_row
{%- endmacro %}


{% macro any_values(columns) -%}
    {#-
        `any_value(c) as c` for each column of `columns`: columns that depend functionally on
        a GROUP BY's key (e.g. model_id on audit_id), carried through without grouping by them.
    -#}
    {%- for column in columns %}any_value({{ column }}) as {{ column }}{{ ', ' if not loop.last }}{% endfor -%}
{%- endmacro %}

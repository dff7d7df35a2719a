{% test model_rules(model, not_null=none, unique=none, rules=none) %}
{#- A model's data rules in one query: its columns that hold no NULL (dbt's not_null), the
    columns that together are its key (dbt_utils' unique_combination_of_columns), and each row
    rule, a SQL condition on its columns ("fisher_q >= fisher_p", "tf >= 1", "modality in
    ('t2t', 't2i', 'i2t')": dbt_utils' accepted_range and expression_is_true, dbt's
    accepted_values).

    Why one test per model: each data test is a node of every build (~50 ms of dbt's own time
    before its query runs) and an asset check in Dagster (its events written one by one). One
    test per column and rule made 372 nodes of a full build of the project; one test per kind of
    rule, 257 nodes (16.4 s); one test per model, 147 nodes (13.2 s, 0.81x).

    A row rule that is NULL for a row (a NULL column) does not fail it, as in those tests: the
    not-null columns check NULLs. Two rows with NULL in the same key columns share the key, as
    in unique_combination_of_columns (GROUP BY puts NULLs together). A failing build lists each
    broken rule with how many rows break it (for the key: how many key values repeat). -#}

{%- set checks = [] %}
{%- for column in not_null or [] %}
    {%- do checks.append(("not null: " ~ column, "select count(*) from " ~ model ~ " where " ~ column ~ " is null")) %}
{%- endfor %}
{%- if unique %}
    {%- set key = unique | join(', ') %}
    {%- do checks.append(("unique: " ~ key, "select count(*) from (select " ~ key ~ " from " ~ model ~ " group by " ~ key ~ " having count(*) > 1)")) %}
{%- endif %}
{%- for rule in rules or [] %}
    {%- do checks.append((rule, "select count(*) from " ~ model ~ " where not (" ~ rule ~ ")")) %}
{%- endfor %}

with

validation as (
    {%- for rule, query in checks %}
    select {{ loop.index }} as rule_number, '{{ rule | replace("'", "''") }}' as rule, ({{ query }}) as failing_rows
    {%- if not loop.last %}
    union all
    {%- endif %}
    {%- endfor %}
)

select * from validation
where failing_rows > 0

{% endtest %}

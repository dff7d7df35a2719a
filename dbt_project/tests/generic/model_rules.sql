{% test model_rules(model, not_null=none, unique=none, rules=none) %}
{#- A model's data rules in one query: its columns that hold no NULL (dbt's not_null), the
    columns that together are its key (dbt_utils' unique_combination_of_columns), and each row
    rule, a SQL condition on its columns ("fisher_q >= fisher_p", "tf >= 1", "modality in
    ('t2t', 't2i', 'i2t')": dbt_utils' accepted_range and expression_is_true, dbt's
    accepted_values).

    Why one test per model: each data test is a node of every build (~50 ms of dbt's own time
    before its query runs). One test per column and rule made 372 nodes of a full build of the
    project; one test per kind of rule, 257 nodes (16.4 s); one test per model, 147 nodes
    (13.2 s, 0.81x). Dagster still shows every rule as a check of its own, named after it
    (orchestration/defs/dbt/checks.py: one query, several named checks; a failing rule's count
    is read back from this query). Both dbt steps of the test suite's finished audit in Dagster
    (3 runs each on 2 cores, median wall, mean CPU): named checks (309), 23.5 s wall, 28.5 s
    CPU; one dbt test per rule with the same checks (226 more dbt nodes), 30.9 s, 37.1 s CPU;
    one unnamed check per test (83), 22.5 s, 25.9 s CPU (Dagster writes each check's events
    one by one).

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

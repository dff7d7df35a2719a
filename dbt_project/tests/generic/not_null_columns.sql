{% test not_null_columns(model, columns) %}
{#- None of `columns` holds a NULL: dbt's not_null for several columns of one model in one
    query. Each data test is a node of its own in every build (~50 ms of dbt's time before its
    query runs), so a model states its not-null columns once instead of one test per column.
    A failing build lists each column that holds NULLs with how many rows. -#}

with

validation as (
    {%- for column in columns %}
    select '{{ column }}' as column_name, count(*) as null_rows
    from {{ model }}
    where {{ column }} is null
    {%- if not loop.last %}
    union all
    {%- endif %}
    {%- endfor %}
)

select * from validation
where null_rows > 0

{% endtest %}

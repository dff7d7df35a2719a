{% test unique_combination_of_columns(model, combination_of_columns) %}
{#- The combination of columns is a key: no two rows share it. -#}
{%- set columns_csv = combination_of_columns | join(', ') %}

with

validation as (
    select
        {{ columns_csv }},
        count(*) as n_rows
    from {{ model }}
    group by {{ columns_csv }}
    having count(*) > 1
)

select * from validation

{% endtest %}

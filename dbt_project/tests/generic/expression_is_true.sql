{% test expression_is_true(model, expression) %}
{#- A boolean SQL expression over the model's columns holds on every row (NULL counts as failing). -#}

with

validation as (
    select *
    from {{ model }}
    where not coalesce(({{ expression }}), false)
)

select * from validation

{% endtest %}

{#- Shapes shared by the models comparing two audits (`dora diff`): the power bounds of the detectable changes (BiasDora's audit pairs: macros/biasdora/audit_pairs.sql). -#}


{% macro detectable_power() -%}
    {#-
        The power of the detectable-change columns: a change of the detectable size is found
        by the test with probability 0.8 (Cohen 1988's convention), stated once.
    -#}
    0.8
{%- endmacro %}


{% macro detectable_share(share, h, direction) -%}
    {#-
        The share a proportion `share` (0..1) has to move to, down (`direction` = 'below') or
        up ('above'), for the change to reach Cohen's h = `h` (h = |2 asin sqrt(p1) - 2 asin
        sqrt(p0)|, Cohen 1988 ch. 6): sin(asin(sqrt(share)) -/+ h / 2)^2. Null when even 0
        (below) or 1 (above) is closer than h: no change in that direction is detectable.
    -#}
    {%- if direction == 'below' -%}
    case when asin(sqrt({{ share }})) - {{ h }} / 2 > 0 then pow(sin(asin(sqrt({{ share }})) - {{ h }} / 2), 2) end
    {%- else -%}
    case when asin(sqrt({{ share }})) + {{ h }} / 2 < pi() / 2 then pow(sin(asin(sqrt({{ share }})) + {{ h }} / 2), 2) end
    {%- endif -%}
{%- endmacro %}

{#- Shapes shared by the models comparing two audits (`dora diff`): the BiasDora audit pairs and the power bounds. -#}


{% macro biasdora_audit_pairs() -%}
    {#-
        SELECT of every (earlier, later) pair of finished audits of the same target, family and
        modality (dim_audits; a T2T audit is not compared with a VLStereoSet one). Columns:
        target, from_audit_id, to_audit_id, from_model_version, to_model_version, is_previous
        (the later audit directly follows the earlier one among the audits of its kind).
    -#}
    with kind_audits as (
        select
            *,
            row_number() over (partition by target, family, modality order by audit_seq) as kind_seq
        from {{ ref('dim_audits') }}
        where status = 'finished' and audit_seq is not null
    )
    select
        later.target,
        earlier.audit_id as from_audit_id,
        later.audit_id as to_audit_id,
        earlier.model_version as from_model_version,
        later.model_version as to_model_version,
        later.kind_seq - earlier.kind_seq = 1 as is_previous
    from kind_audits as later
    inner join kind_audits as earlier
        on  earlier.target = later.target
        and earlier.family = later.family
        and earlier.modality = later.modality
        and earlier.kind_seq < later.kind_seq
{%- endmacro %}


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

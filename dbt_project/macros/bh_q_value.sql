{% macro bh_q_value(p, n_tests, p_rank, partition_by) -%}
    {#-
        Benjamini-Hochberg q-value (BH 1995; the paper's FDR control, docs/method.md#3-associations) of
        the p-value column `p` within each `partition_by` group: p * m / rank, running minimum
        from the largest rank down, capped at 1 - the same numbers as
        `scipy.stats.false_discovery_control(ps, method='bh')`. `n_tests`: m, the count of
        non-null p-values of the group; `p_rank`: the row's rank by p ascending (nulls last).
        A null p-value gets a null q-value (it is not a test).
    -#}
    case when {{ p }} is not null then least(
        cast(1 as double),
        min({{ p }} * (cast({{ n_tests }} as double) / {{ p_rank }})) over (
            partition by {{ partition_by | join(', ') }}
            order by {{ p_rank }} desc
            rows between unbounded preceding and current row
        )
    ) end
{%- endmacro %}


{% macro audit_pairs(audits, group_by, first_at) -%}
    {#-
        Every (earlier, later) pair of audits within each `group_by` group (e.g. one model id
        and probe), audits ordered by `first_at` (their first landed row), then audit_id.
        `audits`: a relation / CTE with audit_id, model_version, the `group_by` columns and
        `first_at`. Columns: the `group_by` columns, from_audit_id, to_audit_id,
        from_model_version, to_model_version, is_previous (the later audit directly follows).
    -#}
    with sequenced as (
        select *, row_number() over (partition by {{ group_by | join(', ') }} order by {{ first_at }}, audit_id) as audit_seq
        from {{ audits }}
    )
    select
        {%- for column in group_by %}
        later.{{ column }},
        {%- endfor %}
        earlier.audit_id as from_audit_id,
        later.audit_id as to_audit_id,
        earlier.model_version as from_model_version,
        later.model_version as to_model_version,
        later.audit_seq - earlier.audit_seq = 1 as is_previous
    from sequenced as later
    inner join sequenced as earlier
        on {% for column in group_by %}earlier.{{ column }} = later.{{ column }} and {% endfor %}earlier.audit_seq < later.audit_seq
{%- endmacro %}


{% macro with_change_q(relation, tie_order) -%}
    {#-
        Every row of `relation` (one change test per row: from_audit_id, to_audit_id, change_p)
        plus change_tests (m: non-null p-values of the audit pair), change_rank (by change_p,
        nulls last, ties by `tie_order`) and change_q (Benjamini-Hochberg within the pair).
    -#}
    select
        *,
        {{ bh_q_value('change_p', 'change_tests', 'change_rank', ['from_audit_id', 'to_audit_id']) }} as change_q
    from (
        select
            *,
            count(change_p) over (partition by from_audit_id, to_audit_id) as change_tests,
            row_number() over (
                partition by from_audit_id, to_audit_id
                order by change_p nulls last, {{ tie_order | join(', ') }}
            ) as change_rank
        from {{ relation }}
    )
{%- endmacro %}


{% macro change_significance(delta) -%}
    {#-
        The shared tail of the change-test marts (counterfactual, ModSCAN, VLStereoSet): the
        columns is_significant_change (change_q < var('significance_level'), false when there
        is no q-value) and change_type: 'unchanged' when not significant, else the sign of
        `delta` (the later minus the earlier audit's value): 'increased' / 'decreased', or
        'shifted' when the test found a change that leaves the value equal (e.g. groups swapped).
    -#}
    coalesce(change_q < {{ var('significance_level') }}, false) as is_significant_change,
    case
        when not coalesce(change_q < {{ var('significance_level') }}, false) then 'unchanged'
        when {{ delta }} > 0 then 'increased'
        when {{ delta }} < 0 then 'decreased'
        else 'shifted'
    end as change_type
{%- endmacro %}


{% macro audit_pair_columns() -%}
    {#-
        The columns audit_pairs() gives each pair beside its group: from_audit_id, to_audit_id,
        from_model_version, to_model_version, is_previous. They lead every change-test mart.
    -#}
    {{ return(['from_audit_id', 'to_audit_id', 'from_model_version', 'to_model_version', 'is_previous']) }}
{%- endmacro %}


{% macro audit_pairs_of(relation, group_by, landed_at) -%}
    {#-
        audit_pairs() over the audits found in `relation` (a ref with audit_id, model_version,
        the `group_by` columns and a landing timestamp `landed_at`): each audit once per group,
        ordered by its first landed row. The head of every family's change-test mart.
    -#}
    {%- set audits -%}
    (select audit_id, {{ group_by | join(', ') }}, any_value(model_version) as model_version,
            min({{ landed_at }}) as first_landed_at
     from {{ relation }}
     group by audit_id, {{ group_by | join(', ') }})
    {%- endset -%}
    {{ audit_pairs(audits, group_by, 'first_landed_at') }}
{%- endmacro %}


{% macro change_test_columns(leading, tested, delta) -%}
    {#-
        The select list of a family's change-test mart, in the order every one of them has:
        the `leading` columns (what was audited twice: model_id, and the variant / probe),
        the audit pair (audit_pair_columns()), the `tested` columns (the cell's key, then its
        before / after values and their difference), change_p, change_q, and
        change_significance(`delta`). Read back by analytics/family_diff.py, which knows no
        family, so the columns' order and names are one contract.
    -#}
    {{ (leading + audit_pair_columns() + tested + ['change_p', 'change_q']) | join(',\n        ') }},
        {{ change_significance(delta) }}
{%- endmacro %}


{% macro before_after(cells, cell_key) -%}
    {#-
        FROM clause pairing each audit pair (the CTE `audit_pairs`, alias p) with its cells:
        `b` the earlier audit's rows of `cells` (one row per audit and `cell_key`), `a` the
        later audit's row of the same cell. Only cells present in both audits are tested.
    -#}
    from audit_pairs as p
    inner join {{ cells }} as b on b.audit_id = p.from_audit_id
    inner join {{ cells }} as a on a.audit_id = p.to_audit_id and {{ join_on('a', 'b', cell_key) }}
{%- endmacro %}


{% macro previous_current_delta(measure, previous, current) -%}
    {#-
        The three columns a *_changes mart gives each `measure` of a cell: the previous audit's
        value (previous_<measure>, from alias `previous`), the current one's (<measure>, alias
        `current`) and their difference (delta_<measure> = current - previous).
    -#}
    {{ previous }}.{{ measure }} as previous_{{ measure }},
        {{ current }}.{{ measure }},
        {{ current }}.{{ measure }} - {{ previous }}.{{ measure }} as delta_{{ measure }}
{%- endmacro %}

{#-
    Data tests of one build scoped to the audits this build touched (a new audit's
    build cost independent of the warehouse's history).

    The staging tables and the association counts / marts grow with every audit, and so did
    every data test on them (a `unique` test over 20 paper-scale audits reads ~10M rows),
    although a build only adds or recomputes the rows of the audits whose inputs landed since
    the last build (the incremental models: landing_shards.sql, incremental_audits.sql).

    Each row of those incremental models records the start of the dbt invocation that wrote
    it (`_dbt_built_at`, dbt's `run_started_at`). When `DORA_DBT_TEST_SCOPE=this_build` (set
    by `dora audit`'s build steps, orchestration/instance.py), a data test on one of the
    models listed in the var `build_scoped_models` reads only the rows of the audits that this
    invocation wrote into any stamped model (every key of these models includes audit_id, so
    a uniqueness test within those audits is complete; the other audits' rows are unchanged
    since the build that tested them). Without it - a plain `dbt build` / `dbt test`, and
    always on `--full-refresh`, where every row is new - every row is tested.
-#}


{% macro dora_build_stamp() -%}
    {#- The start of this dbt invocation as a SQL timestamp (UTC). -#}
    cast('{{ run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f") }}' as timestamp)
{%- endmacro %}


{% macro select_with_build_stamp(cte, carried) -%}
    {#-
        SELECT of every column of `cte` plus `_dbt_built_at` = this invocation. `carried`:
        true when `cte` already has the column (rows re-read from {{ this }}): it is replaced.
    -#}
    {%- if carried %}
    select * replace ({{ dora_build_stamp() }} as _dbt_built_at) from {{ cte }}
    {%- else %}
    select *, {{ dora_build_stamp() }} as _dbt_built_at from {{ cte }}
    {%- endif %}
{%- endmacro %}


{% macro dora_stamped_audits(database, schema) -%}
    {#-
        SQL list of the audit_id of every row written by this invocation into a stamped model,
        read once per test as literals, so the test's own scan is pruned by audit_id (DuckDB
        zone maps) instead of probing a subquery row by row. The stamp filter itself is
        pruned too: rows are appended build by build.
    -#}
    {%- set parts = [] -%}
    {%- for name in var('build_stamped_models') -%}
        {%- set rel = adapter.get_relation(database=database, schema=schema, identifier=name) -%}
        {%- if rel is not none and has_columns(rel, ['_dbt_built_at', 'audit_id']) -%}
            {%- do parts.append('select audit_id from ' ~ rel ~ ' where _dbt_built_at >= ' ~ dora_build_stamp()) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set audits = [] -%}
    {%- if parts -%}
        {%- set result = run_query('select distinct audit_id from (' ~ (parts | join(' union all ')) ~ ') where audit_id is not null order by 1') -%}
        {%- for row in result.rows -%}
            {%- do audits.append("'" ~ (row[0] | replace("'", "''")) ~ "'") -%}
        {%- endfor -%}
    {%- endif -%}
    {{ audits | join(', ') if audits else 'null' }}
{%- endmacro %}


{% macro default__get_where_subquery(relation) -%}
    {#- dbt's own (a test's `where` config), plus the build scope above. -#}
    {%- set where = config.get('where', '') -%}
    {%- set scoped = execute
        and env_var('DORA_DBT_TEST_SCOPE', 'all') == 'this_build'
        and relation.identifier is defined
        and (relation.identifier | lower) in var('build_scoped_models') -%}
    {%- if where or scoped -%}
        {%- set filtered -%}
            (select * from {{ relation }} where {{ where if where else 'true' }}
            {%- if scoped %} and audit_id in ({{ dora_stamped_audits(relation.database, relation.schema) }}){% endif %}) dbt_subquery
        {%- endset -%}
        {%- do return(filtered) -%}
    {%- else -%}
        {%- do return(relation) -%}
    {%- endif -%}
{%- endmacro %}

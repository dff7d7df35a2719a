{#-
    Staging incremental on the landing shards.

    A landing shard (ingestion/landing.py) is immutable once written, so the LISTING of a
    table's shards is the staging model's watermark: each staged row records the shard it was
    read from (`_landing_shard`), and an incremental build reads only the shards not yet
    staged (the empty `_schema.parquet` shard is always read: it types the scan). A build after
    one new audit thus reads that audit's shards, not the warehouse's whole history.

    Usage in a staging model (materialized='incremental', delete+insert on the row key):
        pre_hook=[restage_if_landing_shards_gone('<table>'), set_new_landing_shards('<table>')]
        select ... from {{ new_landing_shards('<table>', source('landing', '<table>')) }}
    A shard that disappeared from the listing (archived) makes the model restage from the
    current listing (all its rows deleted, every listed shard read), so the staged rows are
    always those of a full refresh. `dbt build --full-refresh` reads every shard.
    The shard list lives in a DuckDB session variable (`getvariable`): no path is written
    into the SQL text.
-#}


{% macro landing_location(table) -%}
    {#-
        The shard glob of landing table `table`, `<landing_root>/<table>/**/*.parquet`, ready to
        sit inside a SQL string literal: `landing_root` is the meta that dbt_project.yml
        (`sources:`) gives every table of the `landing` source, where the home is escaped once,
        and each table's `external_location` is built from the same value (a table's `meta`,
        not `source_meta`: the source spans several files). Only known at execution (the graph).
    -#}
    {%- if not execute -%}{{ return('') }}{%- endif -%}
    {%- set landing = graph.sources.values() | selectattr('source_name', 'equalto', 'landing') | first -%}
    {{ return(landing.meta.landing_root ~ '/' ~ table ~ '/**/*.parquet') }}
{%- endmacro %}


{% macro landing_shard_listing(table) -%}
    {#- SELECT of the current shard files of a landing table (column `file`). -#}
    select file from glob('{{ landing_location(table) }}')
{%- endmacro %}


{% macro landing_shards_staged(table) -%}
    {#- True when {{ this }} exists, is not being fully refreshed and records its shards. -#}
    {{ return(is_incremental() and has_columns(this, ['_landing_shard'])) }}
{%- endmacro %}


{% macro restage_if_landing_shards_gone(table) -%}
    {#- Pre-hook: delete every staged row when a staged shard is no longer listed. -#}
    {%- if landing_shards_staged(table) -%}
    delete from {{ this }}
    where exists (
        select 1
        from (select distinct _landing_shard from {{ this }}) as staged
        where staged._landing_shard not in ({{ landing_shard_listing(table) }})
    )
    {%- else -%}
    select 1
    {%- endif -%}
{%- endmacro %}


{% macro set_new_landing_shards(table) -%}
    {#- Pre-hook: the session variable of the shards to read (new ones, or all). -#}
    set variable dora_shards_{{ table }} = (
        select list(file order by file)
        from ({{ landing_shard_listing(table) }}) as listing
        {%- if landing_shards_staged(table) %}
        where file not in (select distinct _landing_shard from {{ this }})
           or file like '%/\_schema.parquet' escape '\'
        {%- endif %}
    )
{%- endmacro %}


{% macro new_landing_shards(table, source_relation) -%}
    {#-
        FROM-clause scan of the shards chosen by set_new_landing_shards, with `_landing_shard`.
        `source_relation` is the model's `source('landing', table)`: it keeps the lineage, and
        a unit test's fixture (a CTE named `__dbt__cte__...`) is used as it is.
    -#}
    {%- if (source_relation | string).startswith('__dbt__cte__') -%}
    (select *, cast(null as varchar) as _landing_shard from {{ source_relation }})
    {%- else -%}
    read_parquet(getvariable('dora_shards_{{ table }}'), union_by_name = true, filename = '_landing_shard')
    {%- endif -%}
{%- endmacro %}


{% macro delete_superseded_description_words() -%}
    {#- Post-hook of stg_description_words: drop tokens of descriptions no longer winning their key. -#}
    {%- if is_incremental() -%}
    delete from {{ this }}
    where description_id not in (select description_id from {{ ref('stg_i2t_descriptions') }})
    {%- else -%}
    select 1
    {%- endif -%}
{%- endmacro %}


{% macro config_staged_from_landing(table, key, post_hook=[]) -%}
    {#-
        The config of a staging model incremental on the shards of landing table `table`
        (this file's header), stated once: delete+insert on the row key `key` (list of
        columns), the two pre-hooks that choose the shards to read, and the model's own
        `post_hook` (list, optional). New landing columns are appended to the staged table.
    -#}
    {{ config(
        materialized='incremental',
        incremental_strategy='delete+insert',
        unique_key=key,
        on_schema_change='append_new_columns',
        pre_hook=[
            "{{ restage_if_landing_shards_gone('" ~ table ~ "') }}",
            "{{ set_new_landing_shards('" ~ table ~ "') }}",
        ],
        post_hook=post_hook,
    ) }}
{%- endmacro %}

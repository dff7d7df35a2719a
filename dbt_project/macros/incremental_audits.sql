{#-
    Incremental marts rebuilt per audit.

    Every statistic of an association is computed within one audit, so a row of
    `fct_associations`, `fct_association_scores` or `agg_completions_by_audit` depends only
    on its own audit's inputs.
    These marts are `materialized='incremental'`, `incremental_strategy='delete+insert'`,
    `unique_key='audit_id'`: a build recomputes, whole, only the audits whose inputs landed
    since they were last built, and keeps every other audit's rows as they are - also the
    audits whose landing shards have been archived since (history stays queryable).
    `dbt build --full-refresh` rebuilds everything from the landing zone as it is now.

    Each row stores its audit's WATERMARKS at build time: the newest landing timestamp of
    each kind of input of the audit (e.g. `fct_associations.inputs_landed_at`). An audit is
    rebuilt when it is absent from the mart, or when one of its current watermarks is newer
    than the recorded one (or is set where the recorded one is null).
-#}


{% macro has_columns(relation, columns) -%}
    {#-
        True when the existing `relation` has every column of `columns` - the models pass the
        columns their yml documents, watermarks included. False on a mart built before one of
        them was added (e.g. a warehouse from before the watermarks): then every audit with
        staged inputs is rebuilt and on_schema_change='sync_all_columns' adds the column, so
        an existing warehouse upgrades without --full-refresh and keeps its archived audits
        (whose rows have null in the new column: they cannot be recomputed).
    -#}
    {%- set existing = adapter.get_columns_in_relation(relation) | map(attribute='name') | map('lower') | list -%}
    {%- for column in columns if column | lower not in existing -%}
        {{ return(false) }}
    {%- endfor -%}
    {{ return(true) }}
{%- endmacro %}


{% macro watermark_is_newer(current, recorded) -%}
    {#- SQL predicate: the watermark `current` is newer than `recorded`, or set where it was not. -#}
    ({{ current }} > {{ recorded }} or ({{ recorded }} is null and {{ current }} is not null))
{%- endmacro %}


{% macro audits_to_rebuild(watermarks, watermark_columns) -%}
    {#-
        SELECT of the audit_id of every audit of `watermarks` (a relation or CTE name with
        one row per audit: audit_id and the `watermark_columns`) that is absent from
        {{ this }} or whose inputs landed since it was built there.
    -#}
    select watermarks.audit_id
    from {{ watermarks }} as watermarks
    left join (
        select
            audit_id,
            {%- for column in watermark_columns %}
            max({{ column }}) as {{ column }}{{ ',' if not loop.last }}
            {%- endfor %}
        from {{ this }}
        group by audit_id
    ) as built
        on watermarks.audit_id = built.audit_id
    where built.audit_id is null
    {%- for column in watermark_columns %}
       or {{ watermark_is_newer('watermarks.' ~ column, 'built.' ~ column) }}
    {%- endfor %}
{%- endmacro %}


{% macro delete_outdated_audit_rows(watermarks_sql, watermark_columns) -%}
    {#-
        Post-hook of the incremental marts: delete the rows of {{ this }} whose audit's inputs
        landed after the row was built. delete+insert already replaced the rows of every
        rebuilt audit that still has rows; this removes those of a rebuilt audit that now has
        none (e.g. every word of a resumed audit superseded by a failed retry), so no stale
        row outlives its audit's new inputs. Audits absent from `watermarks_sql` (archived
        landing shards) are left alone.
    -#}
    delete from {{ this }} as built
    using ({{ watermarks_sql }}) as watermarks
    where built.audit_id = watermarks.audit_id
      and (
        {%- for column in watermark_columns %}
        {{ 'or ' if not loop.first }}{{ watermark_is_newer('watermarks.' ~ column, 'built.' ~ column) }}
        {%- endfor %}
      )
{%- endmacro %}


{% macro association_input_watermarks() -%}
    {#-
        One row per audit with staged co-occurrence inputs: `inputs_landed_at`, the newest
        landing timestamp of the audit's inputs of `int_document_words` - the T2T completions'
        `generated_at`, the image descriptions' `generated_at` and their tokens' `tokenised_at`
        (ingestion/contracts/ SCHEMAS). It is taken over ALL the audit's staged rows, not only
        those that became document words, so a retry that removes a word (a later failed
        completion, an error description) also counts as new input.
    -#}
    select audit_id, max(landed_at) as inputs_landed_at
    from (
        select audit_id, generated_at as landed_at
        from {{ ref('stg_t2t_completions') }}
        union all
        select audit_id, generated_at as landed_at
        from {{ ref('stg_i2t_descriptions') }}
        union all
        select descriptions.audit_id, description_words.tokenised_at as landed_at
        from {{ ref('stg_description_words') }} as description_words
        inner join {{ ref('stg_i2t_descriptions') }} as descriptions
            on description_words.description_id = descriptions.description_id
    ) as landed_inputs
    group by audit_id
{%- endmacro %}


{% macro association_score_watermarks() -%}
    {#-
        One row per audit of `fct_associations`: `inputs_landed_at` (its associations'
        watermark, changed when they were rebuilt) and `scores_landed_at`, the newest
        `scored_at` / `judged_at` of its landed sentiment, toxicity and judge rows (null when
        none). Kept apart, so a clock difference between the probe and the scorers' hosts
        cannot hide either kind of change.
    -#}
    select
        association_inputs.audit_id,
        association_inputs.inputs_landed_at,
        score_inputs.scores_landed_at
    from (
        select audit_id, max(inputs_landed_at) as inputs_landed_at
        from {{ ref('fct_associations') }}
        group by audit_id
    ) as association_inputs
    left join (
        select audit_id, max(landed_at) as scores_landed_at
        from (
            select audit_id, scored_at as landed_at from {{ ref('stg_sentiment_scores') }}
            union all
            select audit_id, scored_at as landed_at from {{ ref('stg_toxicity_scores') }}
            union all
            select audit_id, judged_at as landed_at from {{ ref('stg_judge_ratings') }}
        ) as landed_scores
        group by audit_id
    ) as score_inputs
        on association_inputs.audit_id = score_inputs.audit_id
{%- endmacro %}


{% macro config_incremental_by_audit(watermarks=none, watermark_columns=[]) -%}
    {#-
        The config of every model rebuilt per audit (this file's header), stated once:
        incremental, delete+insert on audit_id, and on_schema_change='sync_all_columns' (a
        column the model gains is added, null in the rows of archived audits; one it no longer
        has is dropped, so a stale column cannot outlive its meaning in an upgraded warehouse).
        `watermarks`: the Jinja call (a string, e.g. "association_input_watermarks()") giving
        the audits' current watermarks, `watermark_columns` their names; with them a post-hook
        deletes the rows of audits whose inputs landed after they were built
        (delete_outdated_audit_rows). Rendered as a hook, so it runs with the model's `this`.
    -#}
    {%- set hooks = ["{{ delete_outdated_audit_rows(" ~ watermarks ~ ", " ~ (watermark_columns | string) ~ ") }}"] if watermarks else [] -%}
    {{ config(
        materialized='incremental',
        incremental_strategy='delete+insert',
        unique_key='audit_id',
        on_schema_change='sync_all_columns',
        post_hook=hooks,
    ) }}
{%- endmacro %}


{% macro watermark_ctes(watermarks_sql, watermark_columns, rebuild_by_audit) -%}
    {#-
        The two leading CTEs of a model rebuilt per audit: `watermarks` (the SELECT
        `watermarks_sql`, one row per audit) and, on an incremental build
        (`rebuild_by_audit`), `audits_to_rebuild` (audits_to_rebuild above). Each ends in a
        comma: the model's own CTEs follow.
    -#}
    watermarks as (
        {{ watermarks_sql }}
    ),
    {%- if rebuild_by_audit %}

    audits_to_rebuild as (
        {{ audits_to_rebuild('watermarks', watermark_columns) }}
    ),
    {%- endif %}
{%- endmacro %}


{% macro counted_input_watermarks() -%}
    {#- association_input_watermarks() named as int_association_counts records it. -#}
    select audit_id, inputs_landed_at as counted_inputs_landed_at
    from ({{ association_input_watermarks() }}) as w
{%- endmacro %}


{% macro only_audits_to_rebuild(rebuild_by_audit, column='audit_id') -%}
    {#- On an incremental build (`rebuild_by_audit`), a WHERE keeping the audits_to_rebuild rows; else nothing. -#}
    {%- if rebuild_by_audit %}where {{ column }} in (select audit_id from audits_to_rebuild){% endif -%}
{%- endmacro %}

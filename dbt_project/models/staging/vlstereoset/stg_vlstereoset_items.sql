{#-
    VLStereoSet items (docs/families/vlstereoset.md#item-format: D = (I, S_s, S_a, S_i, y)), one row per (dataset_id,
    item_id): the latest landed snapshot wins (a re-landing with new image statuses replaces
    the older one).
-#}

with

source as (
    select * from {{ source('landing', 'vlstereoset_items') }}
),

latest as (
    {{ latest_per_key('source', ['dataset_id', 'item_id'], ['landed_at desc nulls last', 'source_row']) }}
),

renamed as (
    select
        dataset_id,
        source_file,
        is_synthetic,
        item_id,
        source_row,
        source_line,
        category,
        target,
        context,
        caption_stereotype,
        caption_anti_stereotype,
        caption_unrelated,
        caption_source,
        label,
        y,
        image_url,
        image_status,
        image_source,
        image_path,
        image_sha256,
        image_width,
        image_height,
        image_error,
        neutral_stereotype,
        neutral_anti_stereotype,
        neutral_method,
        neutral_rule,
        neutral_status,
        landed_at
    from latest
)

select * from renamed

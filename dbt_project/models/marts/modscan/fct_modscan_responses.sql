{#-
    PUBLIC CONTRACT: one row per ModSCAN query (seed 000 §3; docs/families/modscan.md#probes-and-modalities and docs/families/modscan.md#parsing-the-answers), answered or
    not. `is_answered`: the model call returned (status <> 'error'); `is_na`: answered but
    N/A (no term, several terms, box filtered / outside / conflicting: the reason is `status`).
-#}

with

final as (
    select
        {{ audit_columns() | join(', ') }},
        backend,
        probe,
        modality,
        attribute,
        scenario,
        instance,
        condition,
        prefix,
        query_unit,
        run,
        seed,
        term_order,
        left_group,
        right_group,
        pair_id,
        left_face_id,
        right_face_id,
        image_sha256,
        prompt_style,
        prompt,
        raw_output,
        answer,
        parse_method,
        parsed_choice,
        chosen_group,
        status,
        status <> 'error' as is_answered,
        status not in ('ok', 'error') as is_na,
        error,
        generation_params,
        answer_mode,
        deviation,
        generated_at
    from {{ ref('stg_modscan_responses') }}
)

select * from final

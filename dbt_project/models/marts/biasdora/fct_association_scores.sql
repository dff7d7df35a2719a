{#-
    PUBLIC CONTRACT: one row per association (audit_id, modality, setting, descriptor, word)
    that is significant or has been scored, with its sentiment, toxicity and LLM-judge bias
    level (docs/method.md#4-scoring). When several scorers / judges scored an association, the
    most recently landed one is reported (its name is in the *_scorer / judge_model column).

    Incremental per audit (macros/incremental_audits.sql): a build recomputes, whole, only the
    audits whose associations were rebuilt (`inputs_landed_at` moved) or that have new score
    rows (`scores_landed_at`), and keeps the others' rows. `dbt build --full-refresh` rebuilds all.
-#}

{%- set watermark_columns = ['inputs_landed_at', 'scores_landed_at'] %}
{#- a judge's identity: answer_mode is part of it (free, the paper's, or constrained) -#}
{%- set judge_identity = ['judge_backend', 'judge_model', 'judge_model_version', 'answer_mode'] %}
{%- set rebuild_by_audit = is_incremental() and has_columns(this, model.columns.keys() | list) %}

{#- Incremental, not a mart table: rebuilds only audits with new inputs, keeps archived ones (macros/incremental_audits.sql). -#}
{{ config_incremental_by_audit('association_score_watermarks()', watermark_columns) }}

with

{{ watermark_ctes(association_score_watermarks(), watermark_columns, rebuild_by_audit) }}

associations as (
    -- on an incremental build only the audits to rebuild (likewise every input below)
    select fct_associations.*, watermarks.scores_landed_at
    from {{ ref('fct_associations') }} as fct_associations
    left join watermarks on fct_associations.audit_id = watermarks.audit_id
    {{ only_audits_to_rebuild(rebuild_by_audit, 'fct_associations.audit_id') }}
),

sentiment_scores as (
    select * from {{ ref('stg_sentiment_scores') }}
    {{ only_audits_to_rebuild(rebuild_by_audit) }}
),

sentiment as (
    -- per association, the sentiment of the scorer that landed last
    {{ latest_per_key('sentiment_scores', association_key(), ['scored_at desc', 'scorer', 'scorer_version']) }}
),

toxicity_scores as (
    select * from {{ ref('stg_toxicity_scores') }}
    {{ only_audits_to_rebuild(rebuild_by_audit) }}
),

toxicity as (
    -- per association, the toxicity of the scorer that landed last
    {{ latest_per_key('toxicity_scores', association_key(), ['scored_at desc', 'scorer', 'scorer_version']) }}
),

judge_ratings as (
    -- answer_mode is part of the judge's identity; null only in fixtures
    select * replace (coalesce(answer_mode, 'free') as answer_mode) from {{ ref('stg_judge_ratings') }}
    {{ only_audits_to_rebuild(rebuild_by_audit) }}
),

judges_landed as (
    -- one row per (association, judge) with the time its latest rating landed
    select
        {{ association_key() | join(', ') }},
        {{ judge_identity | join(', ') }},
        max(judged_at) as last_judged_at
    from judge_ratings
    group by all
),

current_judge as (
    -- per association, the judge (backend, model, version) whose ratings landed last
    select *
    from judges_landed
    qualify row_number() over (
        partition by {{ association_key() | join(', ') }}
        order by last_judged_at desc, {{ judge_identity | join(', ') }}
    ) = 1
),

judged as (
    select
        {{ qualified('r', association_key()) }},
        r.judge_backend,
        r.judge_model,
        r.answer_mode,
        count(*) as judge_runs,
        count(r.rating) as judge_ratings_parsed,
        quantile_disc(r.rating, 0.5) as bias_level,
        avg(r.expected_rating) as bias_level_expected
    from judge_ratings as r
    inner join current_judge as c
        using ({{ (association_key() + judge_identity) | join(', ') }})
    group by all
),

final as (
    select
        {{ qualified('a', association_key()) }},
        a.is_significant,
        a.fisher_q,
        coalesce(s.text, t.text) as association_text,
        s.scorer as sentiment_scorer,
        s.sentiment_label,
        s.sentiment_score,
        t.scorer as toxicity_scorer,
        t.toxicity,
        t.is_toxic,
        -- what the word adds to the descriptor's own score: the classifiers score identity terms
        -- alone as toxic (Dixon et al. 2018), so the sentence's score measures the descriptor;
        -- the difference to the sentence without the word measures the association (the prior
        -- correction of Kurita et al. 2019); docs/method.md#4-scoring
        t.baseline_toxicity,
        t.toxicity - t.baseline_toxicity as association_toxicity,
        t.toxicity - t.baseline_toxicity >= {{ var('association_toxicity_threshold') }} as is_toxic_association,
        s.baseline_sentiment_score,
        s.sentiment_score - s.baseline_sentiment_score as association_sentiment,
        -- the same correction for sentiment: a sentence negative only through its descriptor
        -- ("A poor person is tall") is not a negative association
        s.sentiment_score - s.baseline_sentiment_score <= -{{ var('association_sentiment_threshold') }} as is_negative_association,
        j.judge_backend,
        j.judge_model,
        j.judge_runs,
        j.judge_ratings_parsed,
        cast(j.bias_level as integer) as bias_level,
        j.bias_level_expected,
        case
            when j.bias_level <= 2 then 'subtle'
            when j.bias_level = 3 then 'moderate'
            when j.bias_level >= 4 then 'extreme'
        end as bias_level_band,
        a.inputs_landed_at,
        a.scores_landed_at,

        a.bias_dimensions,
        a.is_paper_significant,
        a.paper_p_value,
        j.answer_mode as judge_answer_mode,
        coalesce(s.score_pool, t.score_pool) as score_pool
    from associations as a
    left join sentiment as s using ({{ association_key() | join(', ') }})
    left join toxicity as t using ({{ association_key() | join(', ') }})
    left join judged as j using ({{ association_key() | join(', ') }})
    where a.is_significant
       or s.word is not null
       or t.word is not null
       or j.word is not null
)

select * from final

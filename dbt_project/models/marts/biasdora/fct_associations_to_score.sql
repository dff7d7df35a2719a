{#- A view, not a mart table: the scorers read it filtered by audit right after a build, and a
    table would copy every association of every audit at each build for one sentence column. -#}
{{ config(materialized='view') }}

{#-
    PUBLIC (read by the scoring assets, orchestration/defs/biasdora/scoring/assets.py): the
    associations the scorers read (docs/method.md#4-scoring): every association of
    fct_associations with its significance flags and its association sentence
    (`association_text`): for T2T the sentence prefix the probe landed with the completion
    that produced the word, a space and the word ("An alcoholic person is" || ' ' || "brawler");
    "<descriptor> <word>" for other modalities. Scoring selects `is_significant` rows
    (--score-pool fisher), `is_paper_significant` rows (--score-pool paper) or all
    (--score-pool all / --score-all) and an audit with `?` parameters: no value is ever put
    into SQL text.

    Rows landed before the probe landed `subject` / `prefix` (both null) get them derived
    here from the stored prompt (a SQL fallback, no re-landing): completion style "<prefix>
    <letter>"; chat style "... square brackets.[ <setting constraint>.] <prefix> [<letter>__]."
    with the noun setting's "a/an" resolved for the letter; the subject is the prefix without
    its trailing "is" / "are" (and article).
-#}

with

associations as (
    select * from {{ ref('fct_associations') }}
),

completions as (
    select
        audit_id,
        setting,
        descriptor,
        word,
        letter,
        subject,
        coalesce(
            prefix,
            case
                when prompt_style = 'completion' and suffix(prompt, ' ' || letter)
                    then left(prompt, length(prompt) - 2)
                when prompt_style = 'chat'
                    then regexp_replace(
                        regexp_extract(
                            prompt,
                            'square brackets\.(?: The completed word must be [^.\n]*\.)? (.+) \[' || letter || '__\]',
                            1
                        ),
                        ' a/an$',
                        case when letter in ('a', 'e', 'i', 'o', 'u') then ' an' else ' a' end
                    )
            end
        ) as prefix
    from {{ ref('stg_t2t_completions') }}
    where parse_status = 'ok'
),

t2t_sentences as (
    -- one sentence per (audit, setting, descriptor, word): the first prefix, as strings sort
    select
        audit_id,
        setting,
        descriptor,
        word,
        min(coalesce(subject, regexp_replace(prefix, ' (is|are)( (a|an|a/an))?$', ''))) as subject,
        min(prefix) as prefix
    from completions
    where nullif(prefix, '') is not null
    group by audit_id, setting, descriptor, word
),

final as (
    select
        {{ qualified('associations', association_key()) }},
        associations.bias_dimensions,
        associations.is_significant,
        -- the paper's p-value-significant pool (--score-pool paper)
        coalesce(associations.is_paper_significant, false) as is_paper_significant,
        t2t_sentences.subject,
        t2t_sentences.prefix,
        coalesce(t2t_sentences.prefix, associations.descriptor) || ' ' || associations.word as association_text,
        -- the same sentence without the word: the scorers score it too, so that an association's
        -- score is what the word adds to the descriptor's (docs/method.md#4-scoring)
        coalesce(t2t_sentences.prefix, associations.descriptor) as baseline_text
    from associations
    left join t2t_sentences
        on  associations.modality = 't2t'
        and t2t_sentences.audit_id = associations.audit_id
        and t2t_sentences.setting = associations.setting
        and t2t_sentences.descriptor = associations.descriptor
        and t2t_sentences.word = associations.word
)

select * from final

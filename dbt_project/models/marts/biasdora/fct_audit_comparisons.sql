{#-
    PUBLIC CONTRACT: what two finished audits of one target have in common, for every pair
    fct_association_changes compares, per modality either audit probed: one row per
    (from_audit_id, to_audit_id, modality). `dora diff` prints it before the changes.

    - The probe rows (int_probe_rows: a T2T completion key, a description key) each audit
      probed, those both probed (`common_rows`: what fct_association_changes counts on) and
      those left out, with the settings, descriptors, letters and runs of each side.
    - The parse rate of each audit on the common rows (rows whose answer parsed / common
      rows) and its change test: the same prompts in both audits, so the rows are paired:
      exact McNemar test of the discordant rows (parsed in one audit only; UDF mcnemar_p =
      statsmodels.stats.contingency_tables.mcnemar(exact=True), analytics/change_tests.py).
    - Power: the smallest change of a word's share of a descriptor's document the change test
      could detect. Cohen's h (Cohen 1988 ch. 6) detected with power 0.8 at the two-sided
      level var('significance_level') by a test of two independent proportions with the
      median common document length of each audit as the sample sizes (UDF
      detectable_effect_size = statsmodels.stats.power.NormalIndPower().solve_power, the
      normal approximation of the Fisher change test), and what it means for a typical word:
      the share of a document's most frequent word (median over the common documents, earlier
      audit) and the shares it had to fall below / rise above (sin(asin(sqrt(p)) -/+ h/2)^2).
      A test with BH over many associations needs more than this: it is a lower bound.
-#}

{{ config(tags=['scores']) }}

{%- set probe_row_key = ['modality', 'setting', 'descriptor_key', 'probe_row'] %}
{%- set pair = ['from_audit_id', 'to_audit_id'] %}

with

audit_pairs as (
    {{ biasdora_audit_pairs() }}
),

probe_row_words as (
    select * from {{ ref('int_probe_rows') }}
),

probe_rows as (
    -- one row per probe row (int_probe_rows has one per row and word)
    select
        audit_id, {{ probe_row_key | join(', ') }},
        any_value(letter) as letter,
        any_value(run) as run,
        bool_or(is_parsed) as is_parsed
    from probe_row_words
    group by audit_id, {{ probe_row_key | join(', ') }}
),

profiles as (
    -- what one audit probed in one modality
    select
        audit_id,
        modality,
        count(*) as probe_rows,
        list(distinct setting order by setting) as settings,
        list(distinct descriptor_key order by descriptor_key) as descriptors,
        list(distinct letter order by letter) filter (where letter is not null) as letters,
        list(distinct run order by run) filter (where run is not null) as runs
    from probe_rows
    group by audit_id, modality
),

pair_modalities as (
    -- every modality either audit of a pair probed
    select distinct audit_pairs.from_audit_id, audit_pairs.to_audit_id, profiles.modality
    from audit_pairs
    inner join profiles on profiles.audit_id in (audit_pairs.from_audit_id, audit_pairs.to_audit_id)
),

paired_profiles as (
    select
        audit_pairs.*,
        pair_modalities.modality,
        coalesce(before.probe_rows, 0) as probe_rows_before,
        coalesce(after.probe_rows, 0) as probe_rows_after,
        coalesce(before.settings, []::varchar[]) as settings_before,
        coalesce(after.settings, []::varchar[]) as settings_after,
        coalesce(before.descriptors, []::varchar[]) as descriptor_list_before,
        coalesce(after.descriptors, []::varchar[]) as descriptor_list_after,
        coalesce(before.letters, []::varchar[]) as letters_before,
        coalesce(after.letters, []::varchar[]) as letters_after,
        coalesce(before.runs, []::integer[]) as runs_before,
        coalesce(after.runs, []::integer[]) as runs_after
    from audit_pairs
    inner join pair_modalities
        on pair_modalities.from_audit_id = audit_pairs.from_audit_id and pair_modalities.to_audit_id = audit_pairs.to_audit_id
    left join profiles as before
        on before.audit_id = audit_pairs.from_audit_id and before.modality = pair_modalities.modality
    left join profiles as after
        on after.audit_id = audit_pairs.to_audit_id and after.modality = pair_modalities.modality
),

common_rows as (
    -- the probe rows both audits of a pair probed, with each audit's parse outcome
    select
        audit_pairs.from_audit_id,
        audit_pairs.to_audit_id,
        {{ qualified('before', probe_row_key) }},
        before.letter,
        before.run,
        before.is_parsed as parsed_before,
        after.is_parsed as parsed_after
    from audit_pairs
    inner join probe_rows as before on before.audit_id = audit_pairs.from_audit_id
    inner join probe_rows as after
        on after.audit_id = audit_pairs.to_audit_id and {{ join_on('after', 'before', probe_row_key) }}
),

common as (
    select
        from_audit_id,
        to_audit_id,
        modality,
        count(*) as common_rows,
        list(distinct setting order by setting) as common_settings,
        count(distinct descriptor_key) as common_descriptors,
        list(distinct run order by run) filter (where run is not null) as common_runs,
        count(*) filter (where parsed_before and parsed_after) as parsed_both,
        count(*) filter (where parsed_before and not parsed_after) as parsed_before_only,
        count(*) filter (where parsed_after and not parsed_before) as parsed_after_only,
        count(*) filter (where not parsed_before and not parsed_after) as parsed_neither
    from common_rows
    group by all
),

common_words as (
    -- each side's word occurrences on the common rows, per document and word
    select common_rows.from_audit_id, common_rows.to_audit_id, 'before' as side,
           words.modality, words.setting, words.descriptor, words.word, sum(words.occurrences) as tf
    from common_rows
    inner join probe_row_words as words
        on words.audit_id = common_rows.from_audit_id and {{ join_on('words', 'common_rows', probe_row_key) }}
    where words.word is not null
    group by all
    union all
    select common_rows.from_audit_id, common_rows.to_audit_id, 'after' as side,
           words.modality, words.setting, words.descriptor, words.word, sum(words.occurrences) as tf
    from common_rows
    inner join probe_row_words as words
        on words.audit_id = common_rows.to_audit_id and {{ join_on('words', 'common_rows', probe_row_key) }}
    where words.word is not null
    group by all
),

documents as (
    -- a descriptor's document on the common rows: its length and its most frequent word's tf
    -- in each audit (0 where the audit has no word for it)
    select
        from_audit_id,
        to_audit_id,
        modality,
        setting,
        descriptor,
        coalesce(sum(tf) filter (where side = 'before'), 0) as doc_length_before,
        coalesce(sum(tf) filter (where side = 'after'), 0) as doc_length_after,
        coalesce(max(tf) filter (where side = 'before'), 0) as top_tf_before
    from common_words
    group by all
),

document_sizes as (
    select
        from_audit_id,
        to_audit_id,
        modality,
        count(*) as documents_compared,
        median(doc_length_before) as median_doc_length_before,
        median(doc_length_after) as median_doc_length_after,
        median(top_tf_before::double / doc_length_before) filter (where doc_length_before > 0) as typical_share
    from documents
    group by all
),

powered as (
    select
        *,
        detectable_effect_size(
            median_doc_length_before, median_doc_length_after,
            {{ var('significance_level') }}, {{ detectable_power() }}
        ) as detectable_h
    from document_sizes
),

final as (
    select
        p.target,
        p.from_audit_id,
        p.to_audit_id,
        p.from_model_version,
        p.to_model_version,
        p.is_previous,
        p.modality,
        p.probe_rows_before,
        p.probe_rows_after,
        coalesce(c.common_rows, 0) as common_rows,
        p.probe_rows_before - coalesce(c.common_rows, 0) as rows_only_before,
        p.probe_rows_after - coalesce(c.common_rows, 0) as rows_only_after,
        p.settings_before,
        p.settings_after,
        coalesce(c.common_settings, []::varchar[]) as common_settings,
        len(p.descriptor_list_before) as descriptors_before,
        len(p.descriptor_list_after) as descriptors_after,
        coalesce(c.common_descriptors, 0) as common_descriptors,
        list_filter(p.descriptor_list_before, lambda d: not list_contains(p.descriptor_list_after, d)) as descriptors_only_before,
        list_filter(p.descriptor_list_after, lambda d: not list_contains(p.descriptor_list_before, d)) as descriptors_only_after,
        p.letters_before,
        p.letters_after,
        p.runs_before,
        p.runs_after,
        coalesce(c.common_runs, []::integer[]) as common_runs,
        coalesce(c.parsed_both, 0) as parsed_both,
        coalesce(c.parsed_before_only, 0) as parsed_before_only,
        coalesce(c.parsed_after_only, 0) as parsed_after_only,
        coalesce(c.parsed_neither, 0) as parsed_neither,
        (c.parsed_both + c.parsed_before_only)::double / nullif(c.common_rows, 0) as parse_rate_before,
        (c.parsed_both + c.parsed_after_only)::double / nullif(c.common_rows, 0) as parse_rate_after,
        case when c.common_rows > 0 then mcnemar_p(c.parsed_before_only, c.parsed_after_only) end as parse_change_p,
        coalesce(s.documents_compared, 0) as documents_compared,
        s.median_doc_length_before,
        s.median_doc_length_after,
        s.typical_share,
        cast({{ var('significance_level') }} as double) as significance_level,
        cast({{ detectable_power() }} as double) as detectable_power,
        s.detectable_h,
        {{ detectable_share('s.typical_share', 's.detectable_h', 'below') }} as detectable_share_below,
        {{ detectable_share('s.typical_share', 's.detectable_h', 'above') }} as detectable_share_above
    from paired_profiles as p
    left join common as c
        on c.from_audit_id = p.from_audit_id and c.to_audit_id = p.to_audit_id and c.modality = p.modality
    left join powered as s
        on s.from_audit_id = p.from_audit_id and s.to_audit_id = p.to_audit_id and s.modality = p.modality
)

select * from final

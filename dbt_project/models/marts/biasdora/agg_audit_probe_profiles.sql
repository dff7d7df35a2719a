{#-
    PUBLIC CONTRACT: what each BiasDora audit probed, per modality, and the earlier audit it can
    be compared with like for like. One row per (audit_id, modality).

    - The probe configuration as the rows show it (int_probe_rows): probe rows, settings,
      descriptors, T2T letters and runs. Two audits with the same probe rows ran the same probe
      configuration, whatever their configs' other fields (backend, batch size) say.
    - `comparable_previous_audit_id`: the latest earlier finished audit of the same target and
      modality that probed exactly the same rows (the same row count and the same two 64-bit
      hash sums of the row keys, as fct_association_changes decides it; a chance collision of
      both is ~2^-128). The version pages of `dora report` compare only such pairs: the pairs
      `dora diff` accepts with no row left out on either side.
-#}

with

audits as (
    select audit_id, target, model_version, audit_seq, status
    from {{ ref('dim_audits') }}
),

probe_row_words as (
    select * from {{ ref('int_probe_rows') }}
),

probe_rows as (
    -- one row per probe row (int_probe_rows has one per row and word)
    select audit_id, modality, setting, descriptor_key, probe_row, any_value(letter) as letter, any_value(run) as run
    from probe_row_words
    group by all
),

profiles as (
    select
        audit_id,
        modality,
        count(*) as probe_rows,
        list(distinct setting order by setting) as settings,
        count(distinct descriptor_key) as descriptors,
        list(distinct letter order by letter) filter (where letter is not null) as letters,
        list(distinct run order by run) filter (where run is not null) as runs,
        bit_xor(hash(setting, descriptor_key, probe_row)) as rows_hash,
        bit_xor(hash(probe_row, descriptor_key, setting, modality)) as rows_hash_2
    from probe_rows
    group by audit_id, modality
),

described as (
    select audits.target, audits.model_version, audits.audit_seq, audits.status, profiles.*
    from profiles
    inner join audits on audits.audit_id = profiles.audit_id
),

comparable as (
    -- the latest earlier finished audit of the target and modality with the same probe rows
    select later.audit_id, later.modality, earlier.audit_id as comparable_previous_audit_id
    from described as later
    inner join described as earlier
        on  earlier.target = later.target
        and earlier.modality = later.modality
        and earlier.audit_seq < later.audit_seq
        and earlier.probe_rows = later.probe_rows
        and earlier.rows_hash = later.rows_hash
        and earlier.rows_hash_2 = later.rows_hash_2
    qualify row_number() over (partition by later.audit_id, later.modality order by earlier.audit_seq desc) = 1
),

final as (
    select
        described.target,
        described.audit_id,
        described.model_version,
        described.audit_seq,
        described.status,
        described.modality,
        described.probe_rows,
        described.settings,
        described.descriptors,
        coalesce(described.letters, []::varchar[]) as letters,
        coalesce(described.runs, []::integer[]) as runs,
        comparable.comparable_previous_audit_id
    from described
    left join comparable on comparable.audit_id = described.audit_id and comparable.modality = described.modality
)

select * from final

"""The landing tables every probe family writes to: the audit log and the quarantined input rows."""

from __future__ import annotations

import pyarrow as pa

#: No family owns these tables: every family's probes write to them.
FAMILY = None

#: landing table -> its Arrow schema.
SCHEMAS: dict[str, pa.Schema] = {
    # models_inference/audit_log.py (every family's probe, through models_inference/resumable.py):
    # one row per audit start / finish / failure event (append-only); dbt reads it as stg_audits.
    "audits": pa.schema(
        [
            ("audit_id", pa.string()),
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("modality", pa.string()),
            ("config_json", pa.string()),
            ("config_hash", pa.string()),
            ("code_version", pa.string()),
            ("status", pa.string()),  # started / finished / failed
            ("rows_generated", pa.int64()),
            ("event_at", pa.timestamp("us", tz="UTC")),
            ("target", pa.string()),  # audit registry target (ingestion/registry.py); null if ad hoc
            # the probe family that ran the audit (its contract's FAMILY). Added after the first
            # audits: shards without it read as null (union_by_name), and stg_audits then maps the
            # family back from modality (dbt_project/macros/audit_family.sql).
            ("family", pa.string()),
        ]
    ),
    # Rows of a user's input file that a family's loader could not read (ingestion/quarantine.py):
    # the good rows are audited, each bad one lands here with its file, line and reason. Lines of a
    # batch output of another shape land here too (dataset_id batch-<file id>; source_file: the
    # batch id or the imported output's path; models_inference/backends/batch_api.py).
    "input_quarantine": pa.schema(
        [
            ("family", pa.string()),  # the probe family that read the file
            ("dataset_id", pa.string()),  # the input's id (e.g. vls-<sha256 prefix>)
            ("source_file", pa.string()),
            ("source_line", pa.int64()),  # 1-based line where the row starts
            ("source_row", pa.int64()),  # 1-based data row (header excluded)
            ("reason", pa.string()),
            ("raw_text", pa.string()),  # the row as read (undecodable bytes as \xNN), cut to 2,000 chars
            ("landed_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
}

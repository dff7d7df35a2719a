"""The toy family's landing contract: its one table, declared in its own module (the shape of
``ingestion/contracts/<family>.py``) and registered by ``tests/toy_family/family.py`` with
:func:`ingestion.contracts.register_contract`."""

from __future__ import annotations

import pyarrow as pa

#: The family that owns these tables (its record's ``name``).
FAMILY = "toy"

#: landing table -> its Arrow schema.
SCHEMAS: dict[str, pa.Schema] = {
    # tests/toy_family/assets.py: one row per landed item of a toy audit (an item landed again,
    # by a resumed audit, is a second row: staging keeps the latest).
    "toy_rows": pa.schema(
        [
            ("audit_id", pa.string()),
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("item", pa.int64()),
            ("word", pa.string()),
            ("status", pa.string()),
            ("landed_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
}

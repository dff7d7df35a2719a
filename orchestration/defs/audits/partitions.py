"""Dynamic partitions of the audit: one partition per (registry target, model version).

Keys are ``<target>@<model version>`` (:func:`ingestion.registry.partition_key`), e.g.
``smollm2-135m@gguf-q4_1-b179c9523d0e``. They are added by the sensor
(``SensorResult(dynamic_partitions_requests=...)``) and the schedule when they first see a
version; the T2T probe asset is partitioned by them, so the UI shows one materialisation
per audited model version.
"""

from __future__ import annotations

import dagster as dg

#: Name of the dynamic partitions set in the Dagster instance.
AUDIT_PARTITIONS = "audit_versions"

audit_partitions = dg.DynamicPartitionsDefinition(name=AUDIT_PARTITIONS)

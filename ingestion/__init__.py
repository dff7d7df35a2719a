"""Ingestion: the ground floor. Shared names, reference data, the landing zone, the registry.

Plain Python (no Dagster import) that imports nothing else of dora's (ARCHITECTURE.md):

* :mod:`ingestion.vocabulary`: the shared names (modalities, settings, association key,
  backend and scorer names, partition separator);
* :mod:`ingestion.landing`: the landing-table schemas (``SCHEMAS``, merged from each family's
  contract module in :mod:`ingestion.contracts`), the atomic Parquet shard writer and
  parameterised reads;
* :mod:`ingestion.crows_pairs` validates the CrowS-Pairs CSV into the ``crows_pairs`` landing
  schema; :mod:`ingestion.biasdora.descriptors` normalises, extracts and loads descriptors;
  :mod:`ingestion.biasdora.templates` builds the five T2T lexical-setting prefixes;
  :mod:`ingestion.biasdora.description_words` tokenises I2T descriptions;
* :mod:`ingestion.registry`: the audit registry's schema and loading (versions are read by
  :mod:`models_inference.model_ref`), knowing no family: a family's own fields of a target are
  declared in its ``ingestion/<family>/target_fields.py`` (:mod:`ingestion.registry_fields`);
* :mod:`ingestion.build_state`: input fingerprints that let re-runs skip unchanged steps;
* ``ingestion/data/<name>/``: shipped reference data with its licence.
"""

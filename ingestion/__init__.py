"""Ingestion: CrowS-Pairs loading, descriptor extraction and the T2T prompt templates.

Plain Python (no Dagster import), unit-tested directly:

* :mod:`ingestion.crows_pairs` validates the CrowS-Pairs CSV into the ``crows_pairs`` landing
  schema;
* :mod:`ingestion.descriptors` normalises descriptor phrases, extracts descriptors from the
  sentence pairs and loads the BiasDora curated list;
* :mod:`ingestion.templates` builds the five T2T lexical-setting prefixes;
* :mod:`ingestion.landing` holds the landing-table schemas and the Parquet shard writer.
"""

"""Dagster wiring and the ``dora`` CLI. Thin: assets call into ingestion/, models_inference/, dbt."""

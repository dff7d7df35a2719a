"""Association analytics for dora: DuckDB UDFs, read-only warehouse queries and reports.

The analytics themselves (tf, df, idf, tf-idf, PMI, Fisher's exact test, Benjamini-Hochberg
q-values, score shares) live as SQL in ``dbt_project/``; this package imports only
:mod:`ingestion` and provides what SQL cannot do exactly (:mod:`analytics.duckdb_plugin`,
:mod:`analytics.fisher`), read-only queries with parameters (:mod:`analytics.query`), the
audit summary, ``dora diff`` (:mod:`analytics.diff`), ``dora report`` (:mod:`analytics.report`)
and a dbt runner for tests and benchmarks (:mod:`analytics.dbt_runner`).
"""

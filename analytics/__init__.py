"""Association analytics for dora: DuckDB UDFs and a small dbt runner.

The analytics themselves (tf, df, idf, tf-idf, PMI, Fisher's exact test, Benjamini-Hochberg
q-values) live as SQL in ``dbt_project/``; this package only provides what SQL cannot do
exactly (:mod:`analytics.duckdb_plugin`) and a way to run dbt from Python
(:mod:`analytics.dbt_runner`).
"""

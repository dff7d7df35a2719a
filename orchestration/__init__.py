"""Dagster wiring and the ``dora`` CLI: the only package that imports Dagster, and everything.

Thin: ``definitions.py`` assembles the per-area lists of ``defs/<area>/`` (assets, checks,
sensors, schedules) whose assets call into :mod:`ingestion`, :mod:`models_inference`,
:mod:`analytics` and dbt; ``instance.py`` holds the job, pool and environment names and the
dbt set-up; ``cli/`` is the ``dora`` command.
"""

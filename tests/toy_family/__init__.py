"""A fifth probe family that exists only in the tests: it proves a family needs its own
homes and one entry in :data:`orchestration.families.FAMILIES`, nothing else.

``toy`` "probes" a fake model: it lands ``rows`` words through
:func:`models_inference.resumable.land_resumable` (no model is loaded). Its landing table is
declared in its own contract module (``contract.py``), which ``family.py`` registers with
:func:`ingestion.contracts.register_contract`; its "marts" are two tables the test writes into
the warehouse, documented like dbt marts in ``models/marts/*.yml`` (its record's
``marts_folder``), from which its record reads their names.
"""

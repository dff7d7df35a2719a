"""A fifth probe family that exists only in the tests: it proves a family needs its own
homes and one entry in :data:`orchestration.families.FAMILIES`, nothing else.

``toy`` "probes" a fake model: it lands ``rows`` words through
:func:`models_inference.resumable.run_resumable` (no model is loaded). Its landing table is
registered in the landing contract by the test (``SCHEMAS``); its "marts" are two tables the
test writes into the warehouse (it has no dbt folder).
"""

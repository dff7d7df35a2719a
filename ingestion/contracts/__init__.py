"""Landing contracts: each probe family declares the column contract of its landing tables here,
in a module of its own (``ingestion/contracts/<family>.py``); the tables every family writes to
(the audit log ``audits``, the quarantined input rows ``input_quarantine``) are in
:mod:`ingestion.contracts.shared`.

A contract module holds two names and imports nothing of dora's:

* ``FAMILY``: the probe family that owns its tables (the ``name`` of its
  ``orchestration.family.ProbeFamily``, which reads its ``landing_tables`` from here), or
  ``None`` for tables shared by every family;
* ``SCHEMAS``: ``{landing table: pyarrow.Schema}``, one entry per table, its comments saying
  who lands it and what one row is. A table name is also its landing folder
  (``$DORA_HOME/landing/<table>/``), its Dagster asset key (``landing/<table>``) and its dbt
  source table (``source('landing', '<table>')``, listed in
  ``dbt_project/models/<family>/_<family>__sources.yml``).

:mod:`ingestion.landing` imports every module of this package when it is imported and merges
their tables into :data:`ingestion.landing.SCHEMAS`. A family that lives outside this
repository writes a module of the same shape anywhere importable and registers it with
:func:`ingestion.landing.register_contract` from the module that defines its family record, so
every process that imports the family has its contract (``tests/toy_family/`` does this).
"""

"""A fifth probe family that exists only in the tests: it proves a family needs its own
homes and one entry in the families list, nothing else.

``toy`` "probes" a fake model: it lands ``rows`` words through
:func:`models_inference.resumable.land_resumable` (no model is loaded). Everything it has is in
this folder: its landing contract (``contract.py``, registered by ``family.py`` with
:func:`ingestion.contracts.register_contract`), its Config and asset, its record
(``family.py``), its dbt models (``models/``: the staging model ``stg_toy_rows`` and the mart
``fct_toy_rows``, the YAML of which its record's ``marts_folder`` reads), its page (``toy.md``)
and its registry entry (``registry.yaml``). ``$DORA_FAMILIES=tests.toy_family.family`` loads
it through the loader of the shipped families (``orchestration/families.py``).
"""

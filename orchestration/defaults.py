"""Defaults of the audit run config, without importing Dagster: the ``dora`` parser reads them
and must answer a bad flag in well under a second. ``orchestration/defs/config.py``
re-exports them."""

#: Descriptors per bias dimension in the default (quick) audit; 0 means all of them.
DEFAULT_PER_DIMENSION = 2
#: Completions per descriptor x setting x letter in the default (quick) audit (paper: 10).
DEFAULT_RUNS = 4
#: Images per descriptor and T2I setting in the default (quick) vision audit (paper: 10).
DEFAULT_IMAGES_PER_DESCRIPTOR = 4

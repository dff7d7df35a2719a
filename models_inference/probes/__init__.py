"""Probe families: one package per family (what to ask a model and how to parse its answer).

A family package holds its prompts and paper constants (``prompts.py``), its answer parsing
and one module per probe, each landing rows through :mod:`models_inference.resumable`.
``biasdora``: the BiasDora T2T, T2I and I2T probes. See ARCHITECTURE.md to add a family.
"""

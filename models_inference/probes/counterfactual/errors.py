"""The counterfactual family's own input error (the shared base classes: ``ingestion/errors.py``).

Declared in the family's record (``ProbeFamily.errors``), so ``dora audit`` recognises it in a
failed Dagster run's step and prints its one-line message (``orchestration/cli/audit.py``).
"""

from __future__ import annotations

from ingestion.errors import InputFileError

__all__ = ["CounterfactualInputError"]


class CounterfactualInputError(InputFileError):
    """Invalid counterfactual input (a manifest or lexicon with nothing usable, an attribute
    value, an occupation); the message names the file, row and field. A file with some good
    rows is not an error: its bad rows are quarantined."""

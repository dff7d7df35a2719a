"""The VLStereoSet family's own input errors (the shared base classes: ``ingestion/errors.py``).

Declared in the family's record (``ProbeFamily.errors``), so ``dora audit`` recognises them in a
failed Dagster run's step and prints their one-line message (``orchestration/cli/audit.py``).
"""

from __future__ import annotations

from ingestion.errors import InputFileError

__all__ = ["ItemPoolTooSmallError", "VLStereoSetFormatError"]


class VLStereoSetFormatError(InputFileError):
    """A VLStereoSet CSV (or image manifest or image folder) that does not fit the format; the
    message names the file, the row (data row number and file line) and the field."""


class ItemPoolTooSmallError(InputFileError):
    """A VLStereoSet pool with fewer items than the paper's item set in some (category, y) cell
    (``--vlstereoset-items paper``); the message names every short cell with its pool count and
    the paper's count."""

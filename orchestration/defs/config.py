"""Run configuration shared by the audit assets (Dagster ``Config``)."""

from __future__ import annotations

from typing import Optional

import dagster as dg

from models_inference.prompts import T2T_SETTINGS

#: Descriptors per bias dimension in the default (quick) audit; 0 means all of them.
DEFAULT_PER_DIMENSION = 2
DEFAULT_RUNS = 4


class AuditConfig(dg.Config):
    """What to audit and how (``dora audit --help`` documents each field).

    Defaults give the quick audit of the README's main command: the embedded SmolLM2-135M,
    all 5 T2T settings, 2 curated descriptors per bias dimension, 4 runs per letter.
    The paper-scale T2T audit is ``per_dimension=0, runs=10`` (406 descriptors x 5 settings
    x 26 letters x 10 runs).
    """

    model: str = "smollm2-135m"
    backend: str = "transformers"
    base_url: Optional[str] = None
    settings: list[str] = list(T2T_SETTINGS)
    runs: int = DEFAULT_RUNS
    letters: str = "abcdefghijklmnopqrstuvwxyz"
    descriptor_source: str = "biasdora"
    descriptors: list[str] = []
    per_dimension: int = DEFAULT_PER_DIMENSION
    prompt_style: Optional[str] = None
    batch_size: int = 64
    audit_id: Optional[str] = None
    progress: bool = True

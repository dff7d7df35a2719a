"""The toy family's Dagster Config: every flag of ``--toy-*`` comes from these fields."""

from __future__ import annotations

from pydantic import Field

from orchestration.defs.common import ErrorShareLimit

TOY_WORDS = ("alpha", "beta", "gamma")


class ToyConfig(ErrorShareLimit):
    """What the toy probe lands."""

    enabled: bool = Field(True, description="run the toy family")
    rows: int = Field(3, ge=1, le=50, description="rows to land")
    word: str = Field(TOY_WORDS[0], description="the word every row carries")
    model: str = Field("toy-model", description="the fake model's id")
    progress: bool = True

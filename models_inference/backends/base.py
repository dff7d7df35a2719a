"""The request and result types every backend shares (text, judge, vision).

A probe family renders its prompts into :class:`RenderedPrompt`; backends take
:class:`GenerationRequest` items (one per row, each with its own seed) and return one
:class:`GenerationResult` per request, in order. Sampling: :class:`SamplingParams`
(neutral defaults; each family passes its paper's values, e.g. BiasDora's
``PAPER_TEMPERATURE`` / ``PAPER_TOP_P`` in :mod:`models_inference.probes.biasdora.prompts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping


@dataclass(frozen=True)
class RenderedPrompt:
    """A prompt ready for a backend (rendered by a probe family's ``prompts`` module).

    Attributes:
        style: ``chat`` or ``completion``.
        text: the completion text (completion style) or the user message (chat style).
        system: the system message (chat style only, else ``None``).
    """

    style: str
    text: str
    system: str | None = None

    def as_messages(self) -> list[dict[str, str]]:
        """Chat messages (``[{"role": ..., "content": ...}]``); completion style gives one user turn."""
        msgs = []
        if self.system:
            msgs.append({"role": "system", "content": self.system})
        msgs.append({"role": "user", "content": self.text})
        return msgs

    def as_text(self) -> str:
        """One string for storage: system and user joined by a blank line."""
        return f"{self.system}\n\n{self.text}" if self.system else self.text


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to generate from.

    Attributes:
        prompt: the rendered prompt (chat messages or completion text).
        seed: per-row seed (int64); the same seed gives the same sample.
        max_new_tokens: generation budget in tokens.
        stop: ``"word"`` (stop once a word is complete: completion style),
            ``"bracket"`` (stop after ``]``: chat style) or ``"eos"``.
        choices: single-token answers whose log-probabilities the result should carry
            (``choice_logprobs``), read at the first generated token that is one of them.
    """

    prompt: RenderedPrompt
    seed: int
    max_new_tokens: int
    stop: str = "eos"
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenerationResult:
    """Raw output of one request: ``finished`` is False when it stopped at max_new_tokens.

    ``choice_logprobs``: natural-log probability of each requested choice at the first
    generated token that is a choice (absent choices are left out; ``None`` when no generated
    token was a choice or the backend gave no log-probabilities).
    """

    text: str
    finished: bool
    error: str | None = None
    choice_logprobs: dict[str, float] | None = None


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters: ``temperature`` (> 0 samples, ``<= 0`` decodes greedily) and
    ``top_p`` in (0, 1] (``1`` applies no nucleus cut).

    The defaults (1.0, 1.0) sample from the model's own distribution unchanged: a backend
    favours no paper. Probes pass their family's settings (BiasDora Appendix A: 0.7 / 0.95,
    :data:`models_inference.probes.biasdora.prompts.PAPER_TEMPERATURE`).
    """

    temperature: float = 1.0
    top_p: float = 1.0


def build_backend(kind: str, backend: str, model: str, factories: Mapping[str, Callable[..., object]], **kwargs):
    """``factories[backend](model, **kwargs)``: the one backend-by-name dispatch of every modality.

    Raises:
        ValueError: unknown backend name (the message lists the known ones).
    """
    if backend not in factories:
        raise ValueError(f"unknown {kind} backend {backend!r}; expected one of {tuple(factories)}")
    return factories[backend](model, **kwargs)


__all__ = ["build_backend", "GenerationRequest", "GenerationResult", "RenderedPrompt", "SamplingParams"]

"""Log-likelihood of a given text from an OpenAI-compatible endpoint (prompt-token log-probs).

A chat API answers; it does not score a given text. The legacy text-completions endpoint
(``POST /v1/completions``) does, in one of two ways, both sent through the project's one
client helper (:class:`~models_inference.backends.openai_api.OpenAIEndpoint`: key from the
environment, redaction, retries, a :class:`~models_inference.backends.openai_api.ServerFleet`
for several URLs):

* ``echo``: ``echo=True, logprobs=1, max_tokens=0`` returns the prompt's own tokens with
  ``token_logprobs`` and ``text_offset`` (the OpenAI legacy completions format; llama.cpp's
  ``llama-server`` and vLLM serve it too);
* ``prompt_logprobs``: vLLM's extension ``prompt_logprobs=0`` (request body) returns, per prompt
  token, ``{token_id: {"logprob": ..., "decoded_token": ...}}`` (``None`` for the first token),
  for servers that ignore or refuse ``echo``.

The prompt is ``context + text``; the text's log-likelihood is the sum of the natural-log
probabilities of the tokens that end after the context/text boundary (a token that straddles
the boundary carries characters of the text and is counted); the context's tokens are
excluded. Token ends come from ``text_offset`` (``echo``) or from the decoded tokens' lengths
counted back from the end of the prompt (``prompt_logprobs``, which gives no offsets). A token
the server gives no log-probability (the prompt's first token when nothing precedes it) is not
counted: ``n_tokens`` is the number of tokens summed.

NOT FROM PAPER: VLStereoSet scores with ITM heads and contrastive similarities (§3.3); this is
the API counterpart of :func:`models_inference.probes.vlstereoset.loglik.text_logliks`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ingestion.errors import ModelNotAvailableError, PromptLogprobsUnsupportedError
from models_inference.backends.openai_api import OpenAIEndpoint, RetryingClient, api_error_text

#: The two ways an endpoint can return prompt-token log-probabilities, tried in this order.
LOGLIK_MODES = ("echo", "prompt_logprobs")
#: The text of the capability check (:func:`detect_loglik_mode`): two words, so a server that
#: returns log-probs for prompt tokens returns at least one that is not ``None``.
_PROBE = "The cat sat."


@dataclass(frozen=True)
class TextLoglik:
    """One text's log-likelihood: ``total`` (natural log, summed over ``n_tokens`` tokens) or,
    when the request failed, ``error`` (redacted ``"<Type>: <message>"``) and ``total is None``."""

    total: float | None
    n_tokens: int
    error: str | None = None


def _request(client, model: str, prompt: str, mode: str):
    if mode == "echo":
        return client.completions.create(model=model, prompt=prompt, echo=True, logprobs=1, max_tokens=0, temperature=0)
    # vLLM rejects max_tokens=0; the one generated token is ignored
    return client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0, extra_body={"prompt_logprobs": 0})


def _field(obj, name: str):
    """An attribute of a reply object, also when the client keeps it as an unknown extra field."""
    value = getattr(obj, name, None)
    if value is None and getattr(obj, "model_extra", None):
        value = obj.model_extra.get(name)
    return value


def prompt_token_logprobs(reply, prompt: str, mode: str) -> list[tuple[int, float | None]] | None:
    """``(end offset, log-prob or None)`` of each prompt token of a completions reply, or
    ``None`` when the reply has no prompt-token log-probabilities (the server ignored the mode).

    Args:
        reply: the ``completions.create`` response (one choice).
        prompt: the prompt sent (its length bounds the prompt tokens and anchors the ends).
        mode: ``echo`` or ``prompt_logprobs`` (:data:`LOGLIK_MODES`).
    """
    choices = getattr(reply, "choices", None) or []
    if not choices:
        return None
    choice = choices[0]
    if mode == "echo":
        lp = getattr(choice, "logprobs", None)
        offsets = list(getattr(lp, "text_offset", None) or [])
        values = list(getattr(lp, "token_logprobs", None) or [])
        n = sum(1 for o in offsets if o < len(prompt))  # generated tokens, if any, come after the prompt
        if n == 0 or len(values) < n or all(v is None for v in values[:n]):
            return None
        ends = [offsets[i + 1] if i + 1 < n else len(prompt) for i in range(n)]
        return list(zip(ends, values[:n], strict=True))
    entries = _field(choice, "prompt_logprobs")
    if not entries or all(e is None for e in entries):
        return None
    out: list[tuple[int, float | None]] = []
    end = len(prompt)
    for entry in reversed(entries):  # ends counted back from the end of the prompt
        if entry is None:
            out.append((end, None))
            continue
        if len(entry) != 1:
            raise ValueError(f"prompt_logprobs entry with {len(entry)} alternatives; prompt_logprobs=0 gives one")
        (info,) = entry.values()
        out.append((end, info.get("logprob") if isinstance(info, dict) else getattr(info, "logprob", None)))
        decoded = info.get("decoded_token") if isinstance(info, dict) else getattr(info, "decoded_token", None)
        end -= len(decoded or "")
    return out[::-1]


def text_loglik(tokens: Sequence[tuple[int, float | None]], boundary: int) -> tuple[float, int]:
    """Sum of the log-probs of the tokens ending after ``boundary`` (the text's), and their count.

    Raises:
        ValueError: no token of the text has a log-probability.
    """
    picked = [lp for end, lp in tokens if end > boundary and lp is not None]
    if not picked:
        raise ValueError("no token of the text has a log-probability")
    bad = [lp for lp in picked if not math.isfinite(lp)]
    if bad:
        raise ValueError(f"non-finite token log-probability {bad[0]}")
    return float(sum(picked)), len(picked)


def _where(endpoint: OpenAIEndpoint) -> str:
    return f"{endpoint.base_url or 'the OpenAI API'} (model {endpoint.model_id!r})"


def detect_loglik_mode(endpoint: OpenAIEndpoint, modes: Sequence[str] = LOGLIK_MODES) -> str:
    """The first of ``modes`` the endpoint answers with prompt-token log-probs (one request each).

    Raises:
        PromptLogprobsUnsupportedError: the endpoint ignores or declines every mode (one line
            naming the endpoint, the model and what it lacks); also when ``/v1/completions``
            itself is missing (HTTP 404/405/501).
        ModelNotAvailableError: the endpoint cannot be reached, or the key variable is unset.
    """
    import openai

    unknown = set(modes) - set(LOGLIK_MODES)
    if unknown:
        raise ValueError(f"unknown log-likelihood mode(s) {sorted(unknown)}; expected {list(LOGLIK_MODES)}")
    raw = endpoint.client("caption log-likelihoods")
    client = RetryingClient(raw, endpoint.max_retries)  # dora's retry policy: a 429 or a restart is not a "no"
    declined = []
    for mode in modes:
        try:
            reply = _request(client, endpoint.model_id, _PROBE, mode)
        except openai.APIStatusError as exc:  # a 4xx/5xx: this mode is declined, try the next
            declined.append(f"{mode}: HTTP {exc.status_code}")
            continue
        except openai.APIError as exc:
            raise ModelNotAvailableError(f"cannot reach {_where(endpoint)}: {api_error_text(exc, raw.api_key)}") from None
        if prompt_token_logprobs(reply, _PROBE, mode) is not None:
            return mode
        declined.append(f"{mode}: no prompt log-probs in the reply")
    raise PromptLogprobsUnsupportedError(
        f"{_where(endpoint)} returns no log-probabilities of prompt tokens ({'; '.join(declined)}): caption "
        "log-likelihoods need /v1/completions with echo=True and logprobs, or vLLM's prompt_logprobs"
    )


def api_text_logliks(endpoint: OpenAIEndpoint, texts: Sequence[str], mode: str, *, context: str = "", on_done=None) -> list[TextLoglik]:
    """Log-likelihood of each text after ``context``, one completions request per text.

    Args:
        endpoint: an OpenAI-compatible endpoint with ``/v1/completions``.
        texts: the texts (captions), in order.
        mode: ``echo`` or ``prompt_logprobs`` (:func:`detect_loglik_mode`).
        context: text before each one (its tokens are excluded); ``""``: none (the server's own
            BOS, if it adds one, is the only context; the first token then has a log-prob).
        on_done: progress callback, ``on_done(1)`` per text.

    Returns:
        One :class:`TextLoglik` per text, in order: natural-log sum and token count, or the
        request's error (a failed request, a reply without prompt log-probs, a text with no
        scored token) as its ``error``; never an exception for one text.

    Raises:
        ModelNotAvailableError: the API key variable is unset.
    """

    def one(client, key, text: str) -> TextLoglik:
        prompt = context + text
        try:
            tokens = prompt_token_logprobs(_request(client, endpoint.model_id, prompt, mode), prompt, mode)
            if tokens is None:
                return TextLoglik(None, 0, f"the reply has no prompt log-probabilities ({mode})")
            total, n = text_loglik(tokens, len(context))
            return TextLoglik(total, n)
        except Exception as exc:  # noqa: BLE001 - one text's failure is its row's error, never the chunk's
            return TextLoglik(None, 0, api_error_text(exc, key))

    return endpoint.each(list(texts), one, on_done, purpose="caption log-likelihoods")


__all__ = ["LOGLIK_MODES", "TextLoglik", "api_text_logliks", "detect_loglik_mode", "prompt_token_logprobs", "text_loglik"]

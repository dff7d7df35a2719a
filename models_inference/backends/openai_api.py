"""The one OpenAI client helper of every API backend (text, judge, image, vision).

What each API backend shares lives here once: the endpoint fields (:class:`OpenAIEndpoint`:
model, base URL, key variable, retries, timeout, concurrency, version), the client
construction (:func:`openai_client`: key read from the environment at call time, never
stored), the redaction of error texts (:func:`redact`, :func:`api_error_text`: some servers
and proxies quote the request's key in their error message) and the concurrency map
(:func:`map_concurrently`: one HTTP request per item, ``concurrency`` in flight). Retries with
exponential backoff on 429 / 5xx / timeouts are the ``openai`` client's own (``max_retries``).
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, TypeVar

from models_inference.model_ref import ModelNotAvailableError

#: Key-shaped tokens: OpenAI-style ``sk-...`` keys (also partly masked ones, ``sk-abc***wxyz``)
#: and any run of 32+ letters, digits, ``_`` or ``-`` (bearer tokens of other providers).
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{3,}|[A-Za-z0-9_\-]{32,})\b")

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with every given secret and anything key-shaped replaced by ``***``.

    The one redaction of dora's API backends (chat, images, vision, judge): every error text
    they keep in a row or log goes through it. Key-shaped means ``sk-`` followed by 3+ key
    characters, or any token of 32+ ``[A-Za-z0-9_-]`` characters.

    Args:
        text: the message to clean.
        secrets: exact strings to mask first (the API key in use); empty ones are skipped.

    Returns:
        The message with each secret and key-shaped token replaced by ``***``.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


def api_error_text(exc: BaseException, key: str | None) -> str:
    """``"<ExceptionType>: <message>"`` of a failed API call, redacted (:func:`redact`) of ``key``."""
    return redact(f"{type(exc).__name__}: {exc}", [key] if key else [])


def openai_client(
    api_key_env: str,
    base_url: str | None = None,
    *,
    max_retries: int,
    timeout: float,
    purpose: str = "the OpenAI-compatible backend",
):
    """The ``openai.OpenAI`` client of every API backend (and of API version look-ups).

    The key is read from the environment variable ``api_key_env`` at call time and never
    stored by dora; ``base_url`` defaults to ``$OPENAI_BASE_URL``, then the official endpoint.
    Retries on 429/5xx/timeouts are the client's (``max_retries``, ``timeout`` in seconds).

    Raises:
        ModelNotAvailableError: ``api_key_env`` is unset or empty (the message names ``purpose``).
    """
    import openai

    key = os.environ.get(api_key_env)
    if not key:
        raise ModelNotAvailableError(f"set {api_key_env} in the environment to use {purpose}")
    return openai.OpenAI(
        api_key=key,
        base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
        max_retries=max_retries,
        timeout=timeout,
    )


def map_concurrently(
    call: Callable[[_Item], _Result],
    items: Iterable[_Item],
    concurrency: int,
    on_done: Callable[[int], None] | None = None,
) -> list[_Result]:
    """``[call(item) for item in items]`` with up to ``concurrency`` calls in flight (threads).

    Results come back in the order of ``items``; ``on_done(1)`` (e.g. a progress bar's tick)
    is called once per result, in that order, as soon as it and all earlier ones are in.

    Raises:
        ValueError: ``concurrency < 1`` (from :class:`~concurrent.futures.ThreadPoolExecutor`).
        Whatever ``call`` raises (the first such exception, in item order).
    """
    results = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for res in pool.map(call, items):
            results.append(res)
            if on_done:
                on_done(1)
    return results


@dataclass
class OpenAIEndpoint:
    """The fields and the request loop every OpenAI-compatible backend shares.

    Attributes:
        model_id: the served model name (e.g. ``gpt-4o``, ``dall-e-3``).
        base_url: endpoint root (default: ``$OPENAI_BASE_URL`` or the OpenAI API).
        api_key_env: the environment variable holding the key (read at call time, never stored).
        max_retries / timeout: the client's retries on 429/5xx/timeouts and its timeout (s).
        concurrency: requests in flight at once.
        model_version: default the served name (an API model's version; ``model_ref.model_version``).
    """

    model_id: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 4
    timeout: float = 60.0
    concurrency: int = 4
    model_version: str = ""
    backend_name: str = "openai"

    def __post_init__(self):
        self.model_version = self.model_version or self.model_id

    def client(self, purpose: str = "the OpenAI-compatible backend"):
        """A configured ``openai.OpenAI`` client (:func:`openai_client`).

        Raises:
            ModelNotAvailableError: the API key variable is unset.
        """
        return openai_client(self.api_key_env, self.base_url, max_retries=self.max_retries, timeout=self.timeout, purpose=purpose)

    def each(
        self,
        requests: Sequence[_Item],
        call: Callable[[object, str, _Item], _Result],
        on_done: Callable[[int], None] | None = None,
        purpose: str = "the OpenAI-compatible backend",
    ) -> list[_Result]:
        """``call(client, key, request)`` for every request, ``concurrency`` at a time, in order.

        ``call`` turns its own API failures into a result (using :func:`api_error_text` with the
        ``key`` it is given); the client is built once per batch of requests.

        Raises:
            ModelNotAvailableError: the API key variable is unset.
        """
        client = self.client(purpose)
        key = client.api_key
        return map_concurrently(lambda req: call(client, key, req), requests, max(1, self.concurrency), on_done)


__all__ = ["OpenAIEndpoint", "api_error_text", "map_concurrently", "openai_client", "redact"]

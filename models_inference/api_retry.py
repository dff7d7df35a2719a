"""The one retry policy of dora's OpenAI-compatible API backends.

The ``openai`` client is built with its own retries off (:func:`~models_inference.backends.openai_api.openai_client`)
and every request of the chat, completion, judge, image and vision backends goes through
:func:`call_with_retries`:

* retried with exponential backoff (0.5 s, 1 s, 2 s, ... capped at 8 s, or the server's
  ``Retry-After``): connection refused / reset (nothing was processed), 429, 5xx;
* **not** retried: a timeout. The server may still be working on the request, and
  re-sending it under load is how a client-side retry storm starts; the row is stored as an
  ``error`` and the next Dagster run retries it (``ResumableTable.final_statuses``);
* never retried: 4xx other than 429 (bad request, auth, not found): they would fail again.

A :class:`CircuitBreaker` shared by one backend's requests stops calling a server that
failed ``threshold`` calls in a row (after their retries): the remaining requests of the run
fail at once with the same error, instead of each waiting out its own backoff against a
server that is down. They land as ``error`` rows and are retried by the next run.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Callable, TypeVar

from ingestion.errors import CircuitOpenError

_R = TypeVar("_R")

#: Seconds of the first backoff; doubled per retry, capped at :data:`MAX_BACKOFF`.
BASE_BACKOFF = 0.5
MAX_BACKOFF = 8.0


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed request may be sent again: connection errors (not timeouts), 429, 5xx."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return False
    if isinstance(exc, openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(value), 60.0) if value is not None else None
    except ValueError:
        return None


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failed calls; then every call fails at once.

    Thread-safe (the backends call it from :func:`map_concurrently`'s threads). A success
    closes it again. ``threshold <= 0`` disables it.
    """

    def __init__(self, threshold: int = 8):
        self.threshold = threshold
        self.failures = 0
        self.last_error: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        return self.threshold > 0 and self.failures >= self.threshold

    def record(self, error: BaseException | None) -> None:
        with self._lock:
            if error is None:
                self.failures, self.last_error = 0, None
            else:
                self.failures += 1
                self.last_error = error


def call_with_retries(
    call: Callable[[], _R],
    max_retries: int,
    breaker: CircuitBreaker | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> _R:
    """``call()``, retried up to ``max_retries`` times on retryable errors (module docstring).

    Raises:
        The last exception of ``call`` when it is not retryable or retries are exhausted;
        :class:`CircuitOpenError` (naming the last error) when ``breaker`` is open.
    """
    if breaker is not None and breaker.open:
        raise CircuitOpenError(
            f"not sent: the server failed {breaker.failures} calls in a row (last: {type(breaker.last_error).__name__}: {breaker.last_error})",
            breaker.last_error,
        )
    attempt = 0
    while True:
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001 - classified below, re-raised when final
            if attempt < max_retries and is_retryable(exc):
                delay = _retry_after(exc)
                if delay is None:
                    delay = min(BASE_BACKOFF * 2**attempt, MAX_BACKOFF) * (0.75 + random.random() / 2)
                attempt += 1
                sleep(delay)
                continue
            if breaker is not None and not _is_request_specific(exc):
                breaker.record(exc)
            raise
        if breaker is not None:
            breaker.record(None)
        return result


def _is_request_specific(exc: BaseException) -> bool:
    """A failure that says something about this request (400 content policy, 422), not the server."""
    import openai

    return isinstance(exc, (openai.BadRequestError, openai.UnprocessableEntityError))


__all__ = ["CircuitBreaker", "call_with_retries", "is_retryable"]

"""The Batch API client of batch mode (:mod:`models_inference.backends.batch_api`): upload a
JSONL file, create a batch (never twice for one file), poll, download, list and cancel, through
the ``openai`` client under dora's retry policy (:class:`BatchClient`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ingestion.errors import BatchError, BatchLostError
from models_inference.backends.batch_requests import COMPLETION_WINDOW
from models_inference.backends.openai_api import api_error_text, openai_client


class BatchClient:
    """The Batch API calls of one endpoint (the first server of a fleet: a batch lives on one
    server), through the ``openai`` client: idempotent calls (upload, retrieve, download,
    list, cancel) under dora's retry policy; ``batches.create`` never re-sent blindly.

    Raises (construction):
        ModelNotAvailableError: the key variable is unset.
    """

    def __init__(self, backend, step: str):
        urls = list(getattr(backend, "base_urls", []) or [])
        self.base_url = urls[0] if urls else None
        self.step = step
        self.client = openai_client(
            getattr(backend, "api_key_env", "OPENAI_API_KEY"),
            self.base_url,
            max_retries=0,
            timeout=max(float(getattr(backend, "timeout", 60.0)), 120.0),
            purpose="the Batch API",
        )
        self.key = self.client.api_key
        self.max_retries = int(getattr(backend, "max_retries", 4))

    def _call(self, what: str, call, *, gone: str | None = None):
        """``call()`` under the retry policy; API errors as one-line :class:`BatchError` s.

        Args:
            gone: what an HTTP 404 means for this call (the batch or file it names is gone),
                raised as :class:`BatchLostError`; ``None``: a 404 means the server has no Batch API.
        """
        import openai

        from models_inference.api_retry import call_with_retries

        try:
            return call_with_retries(call, self.max_retries)
        except openai.APIStatusError as exc:
            where = self.base_url or "the OpenAI API"
            if exc.status_code == 404 and gone is not None:
                raise BatchLostError(f"{self.step}: {gone} (HTTP 404 at {where}: {api_error_text(exc, self.key)})") from None
            if exc.status_code in (404, 405, 501):
                raise BatchError(
                    f"{self.step}: {where} has no Batch API ({what}: HTTP {exc.status_code}); run without --api-batch, "
                    "or write the files with `dora batch export` for an offline runner (vLLM's run-batch)"
                ) from None
            raise BatchError(f"{self.step}: the Batch API refused {what}: {api_error_text(exc, self.key)}") from None
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise BatchError(
                f"{self.step}: the Batch API could not be reached for {what}: {api_error_text(exc, self.key)}; "
                "what was recorded is kept: run the same command again"
            ) from None

    def upload(self, path: Path) -> str:
        """Upload a JSONL file (``purpose="batch"``); returns its file id."""

        def send():
            with open(path, "rb") as fh:
                return self.client.files.create(file=(path.name, fh, "application/jsonl"), purpose="batch")

        return self._call(f"the upload of {path.name}", send).id

    def find(self, file_id: str, pages: int = 20, skip=()):
        """The batch created from ``file_id`` among the latest ``pages`` x 100 batches, or
        ``None``; batches in ``skip`` (earlier batches of the file that failed) are passed over."""
        page = self._call("the batch listing", lambda: self.client.batches.list(limit=100))
        for _ in range(pages):
            for batch in page.data:
                if batch.input_file_id == file_id and batch.id not in skip:
                    return batch
            if not page.has_next_page():
                return None
            page = self._call("the batch listing", page.get_next_page)
        return None

    def create(self, file_id: str, endpoint: str, metadata: Mapping[str, str], skip=()):
        """Create the batch of ``file_id``, unless one exists already (:meth:`find`, passing over
        the batches in ``skip``): a create call that failed may still have created it, so it is
        looked for, never re-sent."""
        import openai

        existing = self.find(file_id, skip=skip)
        if existing is not None:
            return existing
        try:
            return self.client.batches.create(input_file_id=file_id, endpoint=endpoint, completion_window=COMPLETION_WINDOW, metadata=dict(metadata))
        except openai.APIError:
            found = self.find(file_id, skip=skip)
            if found is not None:
                return found
            return self._call(
                f"the creation of the batch of file {file_id}",
                lambda: self.client.batches.create(
                    input_file_id=file_id, endpoint=endpoint, completion_window=COMPLETION_WINDOW, metadata=dict(metadata)
                ),
            )

    def retrieve(self, batch_id: str):
        """The batch. Raises :class:`BatchLostError` when the API does not know it (HTTP 404)."""
        return self._call(
            f"the status of batch {batch_id}",
            lambda: self.client.batches.retrieve(batch_id),
            gone=f"batch {batch_id} is unknown to this API key (deleted, or created with another key or organisation)",
        )

    def cancel(self, batch_id: str):
        """Cancel the batch. Raises :class:`BatchLostError` when the API does not know it (HTTP 404)."""
        return self._call(
            f"the cancellation of batch {batch_id}",
            lambda: self.client.batches.cancel(batch_id),
            gone=f"batch {batch_id} is unknown to this API key (deleted, or created with another key or organisation)",
        )

    def content(self, file_id: str) -> str:
        """A file's text (UTF-8). Raises :class:`BatchLostError` when it is gone (HTTP 404)."""
        return self._call(
            f"the download of file {file_id}",
            lambda: self.client.files.content(file_id),
            gone=f"file {file_id} expired or was deleted (the Batch API keeps batch files 30 days by default)",
        ).content.decode("utf-8")


__all__ = ["BatchClient"]

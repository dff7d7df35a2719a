"""Batch mode of the API steps that carry the volume: the OpenAI Batch API, and the same JSONL
format for offline runners (vLLM's ``vllm run-batch``).

Against a hosted model, one request per row means hours of rate limits at full price; the
OpenAI Batch API takes the same requests as JSONL files (one line per request:
``{"custom_id", "method": "POST", "url", "body"}``; at most :data:`MAX_REQUESTS_PER_FILE`
requests and :data:`MAX_FILE_BYTES` per file; endpoints ``/v1/chat/completions`` and
``/v1/completions`` here; completion window ``24h``), at half price in a separate rate-limit
pool. vLLM's ``run-batch`` reads and writes the same line format offline.

A step's batch run (:func:`run_batched`), for its planned rows not yet landed:

1. writes their requests as JSONL files within the limits (:func:`split_sizes`), each line's
   ``custom_id`` the row's resume key (:func:`custom_id`), and records every file with its
   keys in the step's ledger (:mod:`models_inference.backends.batch_ledger`) *before* anything
   is sent; rows already in an open batch are never put into another one;
2. uploads each file (``purpose="batch"``) and creates its batch, recording the file id and
   then the batch id; a run killed between creating a batch and recording it finds the batch
   again by its input file (``batches.list``) instead of creating a second one; a failed
   ``batches.create`` call is never retried blindly (the same look-up first);
3. polls the batches (with ``wait``, until none is open, showing the request counts; without,
   once) and lands each finished batch's output and error files as rows with their status, in
   one shard named after the batch (landing a batch again rewrites the same shard: exactly
   once). Requests that failed (an HTTP error, a reply that is not a completion) land as
   ``error`` rows; requests that never ran (``batch_expired`` / ``batch_cancelled`` lines,
   or missing from an expired or cancelled batch's files) land nothing; both go into the next
   batch (at most ``retries`` times per row in one run; the next run retries the rest). A batch
   the API failed as a whole (a bad file, over a limit) fails the step in one line naming the
   cause (:class:`~ingestion.errors.BatchError`).

Requests carry what the live backend would send (:func:`request_body`: the same fields as
:class:`~models_inference.backends.text.OpenAIChatBackend`), and replies are read the same way
(:func:`result_of`), so a row is the same whichever way it was generated; the audit id does not
depend on the mode. Offline engines: :func:`export_batched` writes the files and records them
as ``exported``; :func:`import_batched` lands a runner's output file, each file once.

Public API: :class:`BatchOptions`, :class:`BatchWork`, :class:`BatchSummary`,
:func:`run_batched`, :func:`export_batched`, :func:`import_batched`, :func:`refresh_ledger`,
:func:`cancel_ledger`, :func:`plan_files`, :func:`split_sizes`, :func:`custom_id`, :func:`key_of`,
:func:`request_body`, :func:`result_of`.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ingestion.errors import BatchError
from ingestion.landing import write_shard
from models_inference.backends.base import GenerationRequest, GenerationResult, SamplingParams
from models_inference.backends.batch_ledger import (
    BatchEntry,
    Ledger,
    atomic_write_text,
    files_dir,
    load_ledger,
    now_text,
    updating,
)
from models_inference.backends.openai_api import api_error_text, openai_client, redact, reply_choices
from models_inference.resumable import (
    AuditInfo,
    ErrorShare,
    ResumableSummary,
    audit_events,
    check_audit_identity,
    holding_lock,
    landing_lock,
)

#: The OpenAI Batch API's limits per input file: requests, and bytes (200 MB).
MAX_REQUESTS_PER_FILE = 50_000
MAX_FILE_BYTES = 200_000_000
#: The only completion window the Batch API offers.
COMPLETION_WINDOW = "24h"
CHAT_URL = "/v1/chat/completions"
COMPLETIONS_URL = "/v1/completions"
#: Batch statuses after which nothing more happens to a batch.
TERMINAL_STATUSES: tuple[str, ...] = ("completed", "expired", "failed", "cancelled")
#: Error codes of a line that was never run (it goes into the next batch; nothing lands).
NOT_RUN_CODES: tuple[str, ...] = ("batch_expired", "batch_cancelled")


@dataclass(frozen=True)
class BatchOptions:
    """How a step runs in batch mode.

    Attributes:
        max_requests: requests per file (at most :data:`MAX_REQUESTS_PER_FILE`).
        max_bytes: bytes per file (at most :data:`MAX_FILE_BYTES`).
        wait: poll until every batch is landed (else: submit, land what is finished, return).
        poll_seconds: seconds between polls while waiting.
        retries: times one run puts a row whose request failed or never ran into a new batch.
        record: what the ledger keeps to rebuild the step without its command (its kind and
            run config, JSON-serialisable; ``dora batch import`` reads it).

    Raises:
        ValueError: a limit below 1 or above the API's, a poll interval <= 0, retries < 0.
    """

    max_requests: int = MAX_REQUESTS_PER_FILE
    max_bytes: int = MAX_FILE_BYTES
    wait: bool = False
    poll_seconds: float = 60.0
    retries: int = 3
    record: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if not 1 <= self.max_requests <= MAX_REQUESTS_PER_FILE:
            raise ValueError(f"max_requests must be in 1..{MAX_REQUESTS_PER_FILE}, got {self.max_requests}")
        if not 1 <= self.max_bytes <= MAX_FILE_BYTES:
            raise ValueError(f"max_bytes must be in 1..{MAX_FILE_BYTES}, got {self.max_bytes}")
        if not self.poll_seconds > 0:
            raise ValueError(f"poll_seconds must be > 0, got {self.poll_seconds}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")


# ----------------------------------------------------------------------------- the line format


def custom_id(key: Sequence) -> str:
    """A row's resume key as a request's ``custom_id``: the key's values as a compact JSON list
    (``["singular","alcoholic person",1,"a",3]``), so any descriptor text survives."""
    return json.dumps(list(key), ensure_ascii=False, separators=(",", ":"), default=str)


def key_of(cid: str) -> tuple:
    """The resume key of a ``custom_id`` (:func:`custom_id` read back; nested lists as tuples).

    Raises:
        ValueError: not a JSON list.
    """
    value = json.loads(cid)
    if not isinstance(value, list):
        raise ValueError(f"custom_id {cid[:80]!r} is not a JSON list")

    def tup(v):
        return tuple(tup(x) for x in v) if isinstance(v, list) else v

    return tup(value)


def request_body(backend, request: GenerationRequest, sampling: SamplingParams, *, constraint: str | None = None,
                 choices: Sequence[str] = ()) -> tuple[str, dict]:
    """The endpoint and JSON body of one request, as the live backend sends it
    (:class:`~models_inference.backends.text.OpenAIChatBackend`: model, temperature, token
    budget, the row's 31-bit seed, ``top_p`` below 1; a completion-style prompt to
    ``/v1/completions``, a chat prompt as messages; log-probs when ``choices`` are asked for;
    a choice ``constraint``'s fields merged into the body).

    Returns:
        ``(url, body)``: :data:`CHAT_URL` or :data:`COMPLETIONS_URL` and the request body.
    """
    from models_inference.backends.server_caps import answer_tokens, constraint_fields, merge_request

    if request.prompt.style == "completion":
        body = backend._sampling_kwargs(sampling, request.max_new_tokens, request.seed)
        body["prompt"] = request.prompt.as_text()
        return COMPLETIONS_URL, body
    budget = answer_tokens(constraint, request.max_new_tokens) if constraint else request.max_new_tokens
    body = backend._sampling_kwargs(sampling, budget, request.seed)
    body["messages"] = request.prompt.as_messages()
    if choices and getattr(backend, "logprobs", False):
        body.update(logprobs=True, top_logprobs=int(getattr(backend, "top_logprobs", 20)))
    if constraint:
        body = merge_request(body, constraint_fields(constraint, choices))
        body.update(body.pop("extra_body", {}))  # the client would merge these into the JSON body
    return CHAT_URL, body


def request_line(cid: str, url: str, body: dict) -> bytes:
    """One JSONL line of a batch input file (``custom_id``, ``method``, ``url``, ``body``), newline included."""
    return (json.dumps({"custom_id": cid, "method": "POST", "url": url, "body": body}, ensure_ascii=False,
                       separators=(",", ":")) + "\n").encode("utf-8")


def _one_line(text: str, key: str | None) -> str:
    return redact(" ".join(str(text).split()), [key] if key else [])[:500]


def result_of(line: Mapping, url: str, backend, *, constraint: str | None = None, choices: Sequence[str] = (),
              key: str | None = None) -> GenerationResult | None:
    """The result of one line of a batch output or error file, read as the live backend reads a reply.

    Returns:
        ``None`` when the request never ran (an error code of :data:`NOT_RUN_CODES`); a result
        with ``error`` (redacted of ``key``) for a failed request (an ``error`` object, an
        HTTP status other than 200, a body that is not a completion); else the answer
        (``choice_logprobs`` read when ``choices`` are given, a constrained answer unwrapped).
    """
    import openai

    error = line.get("error")
    response = line.get("response") or {}
    if isinstance(error, Mapping) and error.get("code") in NOT_RUN_CODES:
        return None
    if error:
        what = f"{error.get('code')}: {error.get('message')}" if isinstance(error, Mapping) else str(error)
        return GenerationResult("", True, error=_one_line(f"batch request failed: {what}", key))
    status, body = response.get("status_code"), response.get("body")
    if status != 200:
        message = body.get("error", body) if isinstance(body, Mapping) else body
        if isinstance(message, Mapping):
            message = message.get("message", message)
        return GenerationResult("", True, error=_one_line(f"HTTP {status}: {message}", key))
    try:
        if url == CHAT_URL:
            from openai.types.chat import ChatCompletion

            from models_inference.backends.server_caps import constrained_answer

            choice = reply_choices(ChatCompletion.model_validate(body))[0]
            content = choice.message.content or ""
            text = constrained_answer(constraint, content) if constraint else content
            lps = backend._choice_logprobs(choice, tuple(choices)) if choices else None
            return GenerationResult(text, choice.finish_reason != "length", choice_logprobs=lps)
        choice = reply_choices(openai.types.Completion.model_validate(body))[0]
        return GenerationResult(choice.text or "", choice.finish_reason != "length")
    except Exception as exc:  # noqa: BLE001 - kept as an 'error' row, never dropped
        return GenerationResult("", True, error=_one_line(api_error_text(exc, key), key))


def read_lines(text: str) -> list[dict]:
    """The JSON objects of a JSONL file's text (blank lines skipped).

    Raises:
        BatchError: a line that is not a JSON object (names its number).
    """
    out = []
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise BatchError(f"batch output line {n} is not JSON ({exc}): {raw[:120]!r}") from None
        if not isinstance(value, dict) or "custom_id" not in value:
            raise BatchError(f"batch output line {n} has no custom_id: {raw[:120]!r}")
        out.append(value)
    return out


# ----------------------------------------------------------------------------- files within the limits


def split_sizes(sizes: Iterable[int], max_requests: int = MAX_REQUESTS_PER_FILE, max_bytes: int = MAX_FILE_BYTES) -> list[tuple[int, int]]:
    """Split requests of the given line sizes (bytes, in order) into consecutive files of at
    most ``max_requests`` requests and ``max_bytes`` bytes, each as full as the limits allow.

    Returns:
        ``[(start, stop), ...]`` index ranges, one per file (none for no request).

    Raises:
        BatchError: one request is larger than ``max_bytes`` (names its index and size).
    """
    out: list[tuple[int, int]] = []
    start, count, size, i = 0, 0, 0, -1
    for i, s in enumerate(sizes):
        if s > max_bytes:
            raise BatchError(f"request {i} is {s:,} bytes, more than the {max_bytes:,} bytes a batch file may hold")
        if count and (count >= max_requests or size + s > max_bytes):
            out.append((start, i))
            start, count, size = i, 0, 0
        count += 1
        size += s
    if count:
        out.append((start, i + 1))
    return out


@dataclass
class BatchWork:
    """One step's requests and rows, for the batch runner (each probe builds its own).

    Attributes:
        name: the ledger's name (the audit id; the judge's model and mode).
        step: the step in messages (``BiasDora T2T``).
        backend: the OpenAI-compatible backend whose endpoint, model, key variable and request
            fields are used (:class:`~models_inference.backends.text.OpenAIChatBackend`).
        planned: the planned items (every row of the step, landed or not).
        key: item -> its resume key (a tuple of JSON values).
        request: item -> its :class:`GenerationRequest` (prompt, seed, token budget).
        rows: ``(items, results)`` -> landing rows (one per item, with its status).
        done: -> the resume keys already landed for good (those are never sent).
        table, partition: where rows land (``write_shard``).
        status_column, error_column, error_status: the rows' status column, the column of a
            failed row's error text and its status (counted against ``max_error_share``).
        sampling: the step's sampling parameters.
        choices, constraint: the answers asked for (log-probs) and the choice constraint.
        audit: the audit whose events the run lands (``started`` / ``finished`` / ``failed``);
            ``None``: no events (the judge).
        identity: checked against the audit's earlier events (:func:`~models_inference.resumable.check_audit_identity`).
        lock: the landing lock's name (default ``name``).
    """

    name: str
    step: str
    backend: object
    planned: Sequence
    key: Callable[[object], tuple]
    request: Callable[[object], GenerationRequest]
    rows: Callable[[list, list[GenerationResult]], list[dict]]
    done: Callable[[], set]
    table: str
    status_column: str
    sampling: SamplingParams = SamplingParams()
    partition: str | None = None
    error_column: str | None = None
    error_status: str = "error"
    choices: tuple[str, ...] = ()
    constraint: str | None = None
    audit: AuditInfo | None = None
    identity: Mapping | None = None
    lock: str | None = None

    def line(self, item) -> tuple[str, str, bytes]:
        """``(custom_id, url, JSONL line)`` of ``item``."""
        cid = custom_id(self.key(item))
        url, body = request_body(self.backend, self.request(item), self.sampling, constraint=self.constraint, choices=self.choices)
        return cid, url, request_line(cid, url, body)

    def meta(self, options: BatchOptions) -> dict:
        urls = getattr(self.backend, "base_urls", [])
        return {"base_url": urls[0] if urls else None, "api_key_env": getattr(self.backend, "api_key_env", "OPENAI_API_KEY"),
                "model": getattr(self.backend, "model_id", None), "record": dict(options.record), "table": self.table}


@dataclass
class FilePlan:
    """One file of a plan (:func:`plan_files`): endpoint, requests, bytes and its lines."""

    endpoint: str
    requests: int
    bytes: int
    keys: list[str]
    lines: list[bytes] = field(repr=False, default_factory=list)


def plan_files(work: BatchWork, items: Sequence, options: BatchOptions, *, keep_lines: bool = True) -> list[FilePlan]:
    """The files ``items``' requests go into: one endpoint per file (chat and completion
    requests apart), each within ``options``' limits (:func:`split_sizes`), in plan order.

    Args:
        keep_lines: keep each file's lines (to write them); ``False`` counts only (dry run).

    Raises:
        BatchError: a request larger than a file may hold.
    """
    by_url: dict[str, list[tuple[str, bytes]]] = {}
    for item in items:
        cid, url, line = work.line(item)
        by_url.setdefault(url, []).append((cid, line if keep_lines else len(line)))
    out = []
    for url, lines in by_url.items():
        sizes = [len(line) if keep_lines else line for _, line in lines]
        for start, stop in split_sizes(sizes, options.max_requests, options.max_bytes):
            part = lines[start:stop]
            out.append(FilePlan(url, len(part), sum(sizes[start:stop]), [c for c, _ in part],
                                [line for _, line in part] if keep_lines else []))
    return out


# ----------------------------------------------------------------------------- prompt tokens, before anything is sent

#: Characters per token of the estimate when no tokenizer of the model is here (OpenAI's rule of
#: thumb for English text), and the tokens a chat message adds to its content (role and
#: separators) plus those that prime the reply (OpenAI's token counting guide for chat models).
CHARS_PER_TOKEN = 4
CHAT_MESSAGE_TOKENS = 3
CHAT_REPLY_TOKENS = 3


def local_tokenizer(model: str):
    """The tokenizer of ``model`` when it is here without a download (a local folder, or a hub
    id in the Hugging Face cache), else ``None`` (API model names such as ``gpt-4o``: none)."""
    path = Path(model).expanduser()
    found = path.is_dir()
    if not found and "/" in model and not model.startswith(("/", ".")):
        try:
            from huggingface_hub import try_to_load_from_cache

            found = isinstance(try_to_load_from_cache(model, "tokenizer_config.json"), str)
        except Exception:  # noqa: BLE001 - an id the cache cannot read: no tokenizer here
            found = False
    if not found:
        return None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(path) if path.is_dir() else model, local_files_only=True)
    except Exception:  # noqa: BLE001 - a folder without a tokenizer: estimate instead
        return None


def count_prompt_tokens(model: str, requests: Sequence[GenerationRequest]) -> tuple[int, str]:
    """The prompt tokens of ``requests`` (each distinct prompt counted once, times its repeats).

    Counted with ``model``'s tokenizer where one is here (:func:`local_tokenizer`: a chat prompt
    through its chat template when it has one, with the generation prompt); else estimated as
    ``ceil(characters / 4)`` per message, plus 3 per chat message and 3 per chat request
    (:data:`CHARS_PER_TOKEN`, :data:`CHAT_MESSAGE_TOKENS`, :data:`CHAT_REPLY_TOKENS`).

    Returns:
        ``(tokens, how)``: ``how`` says "counted with <model>'s tokenizer" or "estimated (...)".
    """
    prompts = Counter((r.prompt.style, r.prompt.system, r.prompt.text) for r in requests)
    tokenizer = local_tokenizer(model) if prompts else None
    total = 0
    for (style, system, text), times in prompts.items():
        if tokenizer is not None:
            if style == "chat" and getattr(tokenizer, "chat_template", None):
                messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
                n = len(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))
            else:
                n = sum(len(tokenizer(part, add_special_tokens=False)["input_ids"]) for part in (system, text) if part)
        else:
            parts = [p for p in (system, text) if p]
            n = sum(-(-len(p) // CHARS_PER_TOKEN) for p in parts)
            if style == "chat":
                n += CHAT_MESSAGE_TOKENS * len(parts) + CHAT_REPLY_TOKENS
        total += n * times
    if tokenizer is not None:
        return total, f"counted with {model}'s tokenizer"
    return total, (f"estimated (~{CHARS_PER_TOKEN} characters per token, {CHAT_MESSAGE_TOKENS} per chat message; no "
                   f"tokenizer of {model} here)")


# ----------------------------------------------------------------------------- the Batch API client


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
        self.client = openai_client(getattr(backend, "api_key_env", "OPENAI_API_KEY"), self.base_url, max_retries=0,
                                    timeout=max(float(getattr(backend, "timeout", 60.0)), 120.0), purpose="the Batch API")
        self.key = self.client.api_key
        self.max_retries = int(getattr(backend, "max_retries", 4))

    def _call(self, what: str, call):
        import openai

        from models_inference.api_retry import call_with_retries

        try:
            return call_with_retries(call, self.max_retries)
        except openai.APIStatusError as exc:
            where = self.base_url or "the OpenAI API"
            if exc.status_code in (404, 405, 501):
                raise BatchError(
                    f"{self.step}: {where} has no Batch API ({what}: HTTP {exc.status_code}); run without --api-batch, "
                    "or write the files with `dora batch export` for an offline runner (vLLM's run-batch)") from None
            raise BatchError(f"{self.step}: the Batch API refused {what}: {api_error_text(exc, self.key)}") from None
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise BatchError(f"{self.step}: the Batch API could not be reached for {what}: {api_error_text(exc, self.key)}; "
                             "what was recorded is kept: run the same command again") from None

    def upload(self, path: Path) -> str:
        """Upload a JSONL file (``purpose="batch"``); returns its file id."""
        def send():
            with open(path, "rb") as fh:
                return self.client.files.create(file=(path.name, fh, "application/jsonl"), purpose="batch")

        return self._call(f"the upload of {path.name}", send).id

    def find(self, file_id: str, pages: int = 20):
        """The batch created from ``file_id`` among the latest ``pages`` x 100 batches, or ``None``."""
        page = self._call("the batch listing", lambda: self.client.batches.list(limit=100))
        for _ in range(pages):
            for batch in page.data:
                if batch.input_file_id == file_id:
                    return batch
            if not page.has_next_page():
                return None
            page = self._call("the batch listing", page.get_next_page)
        return None

    def create(self, file_id: str, endpoint: str, metadata: Mapping[str, str]):
        """Create the batch of ``file_id``, unless one exists already (:meth:`find`): a create
        call that failed may still have created it, so it is looked for, never re-sent."""
        import openai

        existing = self.find(file_id)
        if existing is not None:
            return existing
        try:
            return self.client.batches.create(input_file_id=file_id, endpoint=endpoint, completion_window=COMPLETION_WINDOW,
                                              metadata=dict(metadata))
        except openai.APIError:
            found = self.find(file_id)
            if found is not None:
                return found
            return self._call(f"the creation of the batch of file {file_id}", lambda: self.client.batches.create(
                input_file_id=file_id, endpoint=endpoint, completion_window=COMPLETION_WINDOW, metadata=dict(metadata)))

    def retrieve(self, batch_id: str):
        return self._call(f"the status of batch {batch_id}", lambda: self.client.batches.retrieve(batch_id))

    def cancel(self, batch_id: str):
        return self._call(f"the cancellation of batch {batch_id}", lambda: self.client.batches.cancel(batch_id))

    def content(self, file_id: str) -> str:
        return self._call(f"the download of file {file_id}", lambda: self.client.files.content(file_id)).content.decode("utf-8")


# ----------------------------------------------------------------------------- the run


@dataclass
class BatchSummary(ResumableSummary):
    """What a batch run did: :class:`~models_inference.resumable.ResumableSummary` (rows landed
    by this run in ``generated``) plus the batch work.

    Attributes:
        files: files written by this run. submitted: requests sent by this run.
        batches: batch ids created by this run. pending: requests in batches still open at the end.
        not_run: requests that never ran (expired, cancelled), put back for the next batch.
    """

    files: int = 0
    submitted: int = 0
    batches: list[str] = field(default_factory=list)
    pending: int = 0
    not_run: int = 0


def _failure_cause(batch) -> str:
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    parts = []
    for err in errors[:3]:
        where = f" (line {err.line})" if getattr(err, "line", None) is not None else ""
        parts.append(f"{err.code}: {err.message}{where}")
    return "; ".join(parts) or f"status {batch.status} without an error message"


class _Runner:
    """One batch run of a step (see :func:`run_batched`)."""

    def __init__(self, work: BatchWork, options: BatchOptions, summary: BatchSummary, tally: ErrorShare | None):
        self.work, self.options, self.summary, self.tally = work, options, summary, tally
        self.items = {}
        for item in work.planned:
            self.items.setdefault(custom_id(work.key(item)), item)
        self._client: BatchClient | None = None
        self.bar = None
        self.ended = 0  # requests of the batches this run landed (the progress bar's done part)

    @property
    def client(self) -> BatchClient:
        if self._client is None:
            self._client = BatchClient(self.work.backend, self.work.step)
        return self._client

    def prepare(self, items: Sequence, state: str = "prepared", folder: Path | None = None) -> list[BatchEntry]:
        """Write ``items``' files and record them (state ``prepared``, or ``exported`` into ``folder``)."""
        plans = plan_files(self.work, items, self.options)
        entries = []
        with updating(self.work.name) as ledger:
            ledger.step = self.work.step
            ledger.meta = {**ledger.meta, **self.work.meta(self.options)}
            for plan in plans:
                entry = BatchEntry(BatchEntry.new_id(), plan.keys, plan.endpoint, plan.requests, plan.bytes, state=state)
                path = (folder or files_dir(self.work.name)) / f"{entry.id}.jsonl"
                # the file first, then its entry: a kill in between leaves a file nothing points to
                atomic_write_text(path, b"".join(plan.lines).decode("utf-8"))
                entry.path = str(path)
                ledger.entries.append(entry)
                entries.append(entry)
        self.summary.files += len(entries)
        return entries

    def _save(self, entry_id: str, **changes) -> BatchEntry:
        with updating(self.work.name) as ledger:
            entry = ledger.entry(entry_id)
            for k, v in changes.items():
                setattr(entry, k, v)
            entry.touch()
        return entry

    def submit(self, entry: BatchEntry) -> BatchEntry:
        """Upload and create the batch of a ``prepared`` / ``uploaded`` entry, recording each step."""
        if entry.state == "prepared":
            file_id = self.client.upload(Path(entry.path))
            entry = self._save(entry.id, file_id=file_id, state="uploaded")
        if entry.state == "uploaded":
            batch = self.client.create(entry.file_id, entry.endpoint, {"dora_entry": entry.id, "dora_ledger": self.work.name[:500]})
            entry = self._save(entry.id, batch_id=batch.id, state="submitted", status=batch.status)
            self.summary.submitted += entry.requests
            self.summary.batches.append(batch.id)
        return entry

    def poll(self, entry: BatchEntry) -> BatchEntry:
        """Refresh a ``submitted`` entry's status; land it when its batch has ended."""
        batch = self.client.retrieve(entry.batch_id)
        counts = getattr(batch, "request_counts", None)
        seen = (batch.status, getattr(counts, "completed", 0) or 0, getattr(counts, "failed", 0) or 0)
        if seen != (entry.status, entry.completed, entry.failed):  # the ledger is rewritten only on a change
            entry = self._save(entry.id, status=seen[0], completed=seen[1], failed=seen[2])
        if batch.status in TERMINAL_STATUSES:
            entry = self.land(entry, batch)
        return entry

    def land(self, entry: BatchEntry, batch) -> BatchEntry:
        """Land an ended batch's output and error files (or, for a batch failed as a whole,
        close it and raise :class:`BatchError` naming the cause)."""
        if batch.status == "failed" and not getattr(batch, "output_file_id", None):
            cause = _failure_cause(batch)
            self._save(entry.id, state="closed", error=cause)
            raise BatchError(
                f"{self.work.step}: batch {batch.id} ({entry.requests:,} requests, file {entry.id}.jsonl) failed as a "
                f"whole: {cause}; none of its requests ran: fix the cause, then run the same command again")
        lines = []
        for file_id in (getattr(batch, "output_file_id", None), getattr(batch, "error_file_id", None)):
            if file_id:
                lines += read_lines(self.client.content(file_id))
        return self.land_lines(entry, lines)

    def land_lines(self, entry: BatchEntry, lines: Sequence[Mapping]) -> BatchEntry:
        """Land the rows of ``entry``'s requests found in ``lines`` (one shard named after the
        entry: landing it again rewrites that shard), close the entry and count the rows."""
        by_cid = {line["custom_id"]: line for line in lines}
        if entry.state != "landing":  # the keys landed by another way meanwhile are left out, once and for all
            done = self.work.done()
            skip = [c for c in entry.keys if c in by_cid and c in self.items and self.work.key(self.items[c]) in done]
            entry = self._save(entry.id, state="landing", skip=skip)
        skip = set(entry.skip)
        items, results, not_run = [], [], 0
        key = getattr(self._client, "key", None)
        for cid in entry.keys:
            line = by_cid.get(cid)
            result = None if line is None else result_of(line, entry.endpoint, self.work.backend,
                                                         constraint=self.work.constraint, choices=self.work.choices, key=key)
            if result is None:
                not_run += 1
            elif cid not in skip and cid in self.items:
                items.append(self.items[cid])
                results.append(result)
        rows = self.work.rows(items, results) if items else []
        write_shard(self.work.table, rows, partition=self.work.partition, name=f"batch-{entry.id}")
        if entry.path and Path(entry.path).parent == files_dir(self.work.name):
            Path(entry.path).unlink(missing_ok=True)
        entry = self._save(entry.id, state="closed", landed=len(rows), not_run=not_run)
        self.summary.generated += len(rows)
        self.summary.not_run += not_run
        self.summary.statuses.update(r[self.work.status_column] for r in rows)
        if self.tally is not None and rows:
            self.tally.add(rows, self.work.status_column, self.work.error_column, self.work.error_status)
        self.ended += entry.requests
        return entry

    def show(self, open_entries: Sequence[BatchEntry]) -> None:
        """Move the progress bar to the requests done: those of the batches landed by this run
        and the completed / failed counts of the open ones, with the open batches' states."""
        if self.bar is None:
            return
        self.bar.total = max(self.bar.total or 0, self.ended + sum(e.requests for e in open_entries))
        self.bar.n = self.ended + sum(e.completed + e.failed for e in open_entries)
        self.bar.set_postfix_str(", ".join(f"{e.batch_id or e.id} {e.status or e.state} {e.completed + e.failed:,}/{e.requests:,}"
                                           for e in open_entries[:3]) + (", ..." if len(open_entries) > 3 else ""))

    def step_once(self) -> list[BatchEntry]:
        """Submit what is prepared, poll what is submitted, land what ended; returns the entries
        still open at the API (``exported`` ones wait for ``dora batch import``, not for a poll)."""
        for entry in load_ledger(self.work.name).open_entries:
            if entry.state in ("prepared", "uploaded"):
                entry = self.submit(entry)
            if entry.state == "landing" and entry.batch_id:  # killed while landing: land the same rows again
                entry = self.land(entry, self.client.retrieve(entry.batch_id))
            elif entry.state == "submitted":
                entry = self.poll(entry)
        return _api_open(load_ledger(self.work.name))

    def todo(self, attempts: Counter) -> list:
        """The planned items to put into new batches: not landed, not in an open entry, and
        sent fewer than ``1 + retries`` times by this run."""
        done = self.work.done()
        flying = load_ledger(self.work.name).in_flight()
        return [item for cid, item in self.items.items()
                if cid not in flying and self.work.key(item) not in done and attempts[cid] <= self.options.retries]


def _api_open(ledger: Ledger) -> list[BatchEntry]:
    """The open entries of ``ledger`` that a batch run resolves (all but ``exported``)."""
    return [e for e in ledger.open_entries if e.state != "exported"]


def _checked_audit(work: BatchWork) -> AuditInfo | None:
    """``work.audit`` carrying ``work.identity``, after :func:`~models_inference.resumable.check_audit_identity`."""
    audit = work.audit
    if audit is not None and work.identity is not None:
        audit = AuditInfo(audit.audit_id, audit.model_id, audit.model_version, audit.modality,
                          {**audit.config, "identity": dict(work.identity)}, audit.target)
        check_audit_identity(audit, work.identity)
    return audit


def run_batched(work: BatchWork, options: BatchOptions, *, progress: bool = True, max_error_share: float | None = None,
                finish: bool = True, sleep: Callable[[float], None] = time.sleep) -> BatchSummary:
    """Generate a step's missing rows through the Batch API and land them (module docstring),
    under the step's landing lock; a run with nothing missing and no open batch sends nothing.

    Args:
        work: the step's requests and rows (:class:`BatchWork`).
        options: limits, waiting, retries (:class:`BatchOptions`).
        progress: show the requests landed so far (tqdm on stderr) while waiting.
        max_error_share: as :func:`~models_inference.resumable.run_resumable`: more than this
            share of the rows landed by this run with ``error_status`` fails the step.
        finish: land the audit's ``finished`` event once nothing is missing or open (not for
            one block of a spread audit, whose last step does).
        sleep: the wait between polls (tests pass a fake).

    Returns:
        A :class:`BatchSummary`; ``pending`` > 0 when batches are still open (no ``wait``).
        Audit events (``work.audit``): ``started`` when anything is missing, ``finished`` when
        nothing is open at the end, ``failed`` (then re-raised) on any exception.

    Raises:
        BatchError: a batch failed as a whole, the API refused a call, the ledger is unreadable.
        ModelNotAvailableError: the key variable is unset. AuditIdentityError: as
            :func:`~models_inference.resumable.check_audit_identity`.
        AuditFailedError: too many failed requests.
    """
    audit = _checked_audit(work)
    name = work.lock or work.name
    with holding_lock(landing_lock(name), f"{work.step} ({name})"):
        summary = BatchSummary(work.name)
        tally = ErrorShare(work.step, max_error_share)
        runner = _Runner(work, options, summary, tally)
        done = work.done()
        summary.planned = len(work.planned)
        summary.already_landed = sum(1 for item in work.planned if work.key(item) in done)
        missing = summary.already_landed < summary.planned
        if not missing and not _api_open(load_ledger(work.name)):
            if audit is not None and finish and summary.planned:
                events = audit_events(audit.audit_id)
                if events and events[-1]["status"] != "finished":
                    audit.land_event("finished", 0)
            return summary
        if audit is not None:
            audit.land_event("started", 0)
        attempts: Counter = Counter()
        try:
            from tqdm.auto import tqdm

            open_entries = runner.step_once()  # batches of earlier runs first: their rows may be all that is missing
            while True:
                todo = runner.todo(attempts)
                if todo:
                    for entry in runner.prepare(todo):
                        for cid in entry.keys:
                            attempts[cid] += 1
                    open_entries = runner.step_once()
                if not open_entries or not options.wait:
                    break
                if runner.bar is None:
                    runner.bar = tqdm(total=0, desc=f"{work.step} batches", unit="request", disable=not progress, file=sys.stderr)
                runner.show(open_entries)
                sleep(options.poll_seconds)
                open_entries = runner.step_once()
                runner.show(open_entries)
            tally.check()
        except BaseException:
            if audit is not None:
                audit.land_event("failed", summary.generated)
            raise
        finally:
            if runner.bar is not None:
                runner.bar.close()
        open_entries = load_ledger(work.name).open_entries
        summary.pending = sum(e.requests for e in open_entries)
        if audit is not None and finish and not open_entries:
            audit.land_event("finished", summary.generated)
        return summary


# ----------------------------------------------------------------------------- offline runners


def export_batched(work: BatchWork, options: BatchOptions, folder: str | Path) -> list[BatchEntry]:
    """Write the requests of the step's rows not landed and not in an open batch as JSONL
    files into ``folder`` for an offline runner (``vllm run-batch -i <file> -o <output>``),
    recorded as ``exported`` in the step's ledger (they go into no other batch until
    :func:`import_batched` lands their output or :func:`cancel_ledger` closes them).

    Returns:
        The exported entries (``path``: each file; empty when nothing is missing).

    Raises:
        BatchError: a request larger than a file may hold; the ledger is unreadable.
    """
    folder = Path(folder).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    audit = _checked_audit(work)
    name = work.lock or work.name
    with holding_lock(landing_lock(name), f"{work.step} ({name})"):
        runner = _Runner(work, options, BatchSummary(work.name), None)
        todo = runner.todo(Counter())
        if not todo:
            return []
        entries = runner.prepare(todo, state="exported", folder=folder)
        if audit is not None:  # the audit exists (model, version, identity) from its first export on
            audit.land_event("started", 0)
        return entries


def import_batched(work: BatchWork, lines: Sequence[Mapping], *, max_error_share: float | None = None) -> BatchSummary:
    """Land an offline runner's output lines (vLLM ``run-batch``: the Batch API's output format)
    as the step's rows: each ``exported`` file whose requests appear in ``lines`` is landed
    once and closed; its requests missing from ``lines`` go back to the pool (the next export
    or batch run sends them again). Lines of files already imported are left alone.

    Returns:
        A :class:`BatchSummary` (``generated``: rows landed; ``files``: files landed).

    Raises:
        BatchError: a line whose ``custom_id`` is in no exported file of the step (names it).
        AuditFailedError: too many failed requests (the rows landed first).
    """
    ledger = load_ledger(work.name)
    owner = {cid: e for e in ledger.entries for cid in e.keys}
    unknown = [line["custom_id"] for line in lines if line["custom_id"] not in owner]
    if unknown:
        raise BatchError(f"{work.step}: {len(unknown)} output line(s) name no request of ledger {work.name!r} "
                         f"(first: custom_id {unknown[0][:120]!r}); import the output of a file `dora batch export` wrote for it")
    audit = _checked_audit(work)
    name = work.lock or work.name
    with holding_lock(landing_lock(name), f"{work.step} ({name})"):
        summary = BatchSummary(work.name, planned=len(work.planned))
        before = work.done()
        summary.already_landed = sum(1 for item in work.planned if work.key(item) in before)
        tally = ErrorShare(work.step, max_error_share)
        runner = _Runner(work, BatchOptions(), summary, tally)
        touched = {owner[line["custom_id"]].id for line in lines}
        try:
            for entry in load_ledger(work.name).entries:
                if entry.id in touched and entry.state in ("exported", "landing"):
                    runner.land_lines(entry, lines)
                    summary.files += 1
            tally.check()
        except BaseException:
            if audit is not None and summary.generated:
                audit.land_event("failed", summary.generated)
            raise
        done = work.done()
        summary.pending = sum(e.requests for e in load_ledger(work.name).open_entries)
        if audit is not None and summary.generated and not summary.pending and all(work.key(i) in done for i in work.planned):
            audit.land_event("finished", summary.generated)
        return summary


# ----------------------------------------------------------------------------- dora batches


def refresh_ledger(name: str) -> Ledger:
    """``name``'s ledger with the status and counts of its submitted batches asked of the API
    (nothing is landed: the step's next run does that).

    Raises:
        BatchError: the API cannot be reached or refuses. ModelNotAvailableError: no key.
    """
    ledger = load_ledger(name)
    submitted = [e for e in ledger.entries if e.state == "submitted"]
    if not submitted:
        return ledger
    client = _client(ledger, name)
    with updating(name) as fresh:
        for entry in fresh.entries:
            if entry.state == "submitted":
                batch = client.retrieve(entry.batch_id)
                counts = getattr(batch, "request_counts", None)
                entry.status = batch.status
                entry.completed = getattr(counts, "completed", 0) or 0
                entry.failed = getattr(counts, "failed", 0) or 0
                entry.touch()
    return load_ledger(name)


def _client(ledger: Ledger, name: str, client: "BatchClient | None" = None) -> BatchClient:
    """A client of the endpoint ``ledger`` recorded (its base URL and key variable), or ``client``."""
    from types import SimpleNamespace

    if client is not None:
        return client
    meta = ledger.meta
    endpoint = SimpleNamespace(base_urls=[meta["base_url"]] if meta.get("base_url") else [],
                               api_key_env=meta.get("api_key_env") or "OPENAI_API_KEY")
    return BatchClient(endpoint, ledger.step or name)


def cancel_ledger(name: str) -> list[BatchEntry]:
    """Cancel every open batch of ``name`` (``batches.cancel``: the API ends it as
    ``cancelled``; the step's next run lands what ran and sends the rest again) and close its
    entries not yet submitted or exported (their rows go back to the pool).

    Returns:
        The entries acted on.

    Raises:
        BatchError: the API refused or cannot be reached. ModelNotAvailableError: no key.
    """
    ledger = load_ledger(name)
    acted = []
    client = None
    with updating(name) as fresh:
        for entry in fresh.entries:
            found = None
            if entry.state == "uploaded":  # a batch created from the file before its id was recorded?
                client = _client(ledger, name, client)
                found = client.find(entry.file_id)
                if found is not None:
                    entry.batch_id, entry.state, entry.status = found.id, "submitted", found.status
            if entry.state == "submitted" and entry.status not in TERMINAL_STATUSES and entry.status != "cancelling":
                client = _client(ledger, name, client)
                entry.status = client.cancel(entry.batch_id).status
            elif entry.state in ("prepared", "uploaded", "exported"):
                entry.state, entry.error = "closed", f"cancelled by dora batches --cancel ({now_text()})"
                if entry.path and Path(entry.path).parent == files_dir(name):
                    Path(entry.path).unlink(missing_ok=True)
            else:
                continue
            entry.touch()
            acted.append(entry)
    return acted


__all__ = [
    "CHAT_URL", "COMPLETIONS_URL", "COMPLETION_WINDOW", "MAX_FILE_BYTES", "MAX_REQUESTS_PER_FILE", "NOT_RUN_CODES",
    "TERMINAL_STATUSES", "BatchClient", "BatchOptions", "BatchSummary", "BatchWork", "FilePlan", "cancel_ledger",
    "count_prompt_tokens", "custom_id", "local_tokenizer", "export_batched", "import_batched", "key_of", "plan_files", "read_lines", "refresh_ledger",
    "request_body", "request_line", "result_of", "run_batched", "split_sizes",
]
